import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { readRegularFile } from '../../util/safe-path.js';
import type { RedisTarget } from './target.js';

// A Redis connection that speaks just what the lock needs (RESP2: AUTH, SELECT, CLIENT
// SETNAME, EVAL), over node:net or node:tls. Not node-redis or ioredis: loading either costs
// more than the rest of a run's start (measured on Node 20, esbuild-bundled: node-redis
// ~117 ms, ioredis ~54 ms, node:net and node:tls ~8 ms), and the lock wants none of what they
// add (reconnection, offline queues, retries that would hide a lost server from the lease).

export type Reply = string | number | null | Reply[];

// The most a reply may hold, in bytes: the lock's are a few dozen, an application's value
// found in a job's key a little more. A server that sends more (or never ends its reply) is
// not one the lock can use, and is not buffered without end.
const MAX_REPLY = 4 * 1024 * 1024;

// An error reply from the server (WRONGPASS, NOPERM, NOSCRIPT...): the connection still works.
export class ReplyError extends Error {
  readonly code: string;
  constructor(message: string) {
    super(message);
    this.code = /^[A-Z]+/.exec(message)?.[0] ?? 'ERR';
  }
}

// The connection went away, or could not be made: `cause` is the socket's error, if any.
export class ConnectionError extends Error {}

interface Pending {
  resolve(reply: Reply): void;
  reject(error: Error): void;
}

export interface RespConnection {
  // The connection was lost (closed, reset, timed out): it answers nothing more.
  readonly lost: boolean;
  command(...args: readonly (string | number)[]): Promise<Reply>;
  close(): Promise<void>;
}

// Connects, authenticates and selects the database; `signal` bounds it all.
export async function connectRedis(target: RedisTarget, name: string, signal: AbortSignal): Promise<RespConnection> {
  signal.throwIfAborted();
  // As a database's sslrootcert is read: a directory, a FIFO, a file denied is a one-line
  // usage (64) or permission (77) error, not a hang or an 'unreachable' server.
  const ca = target.tls?.ca === undefined ? undefined : readRegularFile(target.tls.ca, `${target.from.startsWith('--') ? target.from : 'lock URL'} ca=`);
  const socket = await open(target, ca, signal);
  const connection = wrap(socket);
  const setup: Promise<Reply>[] = [];
  if (target.password !== undefined) setup.push(target.user !== undefined ? connection.command('AUTH', target.user, target.password) : connection.command('AUTH', target.password));
  if (target.db !== 0) setup.push(connection.command('SELECT', target.db));
  setup.push(connection.command('CLIENT', 'SETNAME', name.replace(/[^!-~]/g, '_')));
  const aborted = new Promise<never>((_, reject) => {
    const stop = () => reject(new ConnectionError(`no answer within the time allowed${describeSignal(signal)}`));
    if (signal.aborted) stop();
    else signal.addEventListener('abort', stop, { once: true });
  });
  try {
    // Every reply read, so that one that failed is not left unhandled.
    const settled = await Promise.race([Promise.allSettled(setup), aborted]);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    return connection;
  } catch (error) {
    socket.destroy();
    throw error;
  }
}

function describeSignal(signal: AbortSignal): string {
  const reason = signal.reason as Error | undefined;
  return reason?.name === 'TimeoutError' ? '' : ` (${reason?.message ?? 'aborted'})`;
}

function open(target: RedisTarget, ca: string | undefined, signal: AbortSignal): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = target.tls
      ? tlsConnect({ host: target.host, port: target.port, servername: isIP(target.host) ? undefined : target.host, ca })
      : netConnect({ host: target.host, port: target.port });
    const ready = target.tls ? 'secureConnect' : 'connect';
    const fail = (error: Error) => {
      socket.destroy();
      reject(error);
    };
    const abort = () => fail(new ConnectionError(`cannot connect within the time allowed${describeSignal(signal)}`));
    signal.addEventListener('abort', abort, { once: true });
    socket.once('error', fail);
    socket.once(ready, () => {
      signal.removeEventListener('abort', abort);
      socket.off('error', fail);
      socket.setNoDelay(true);
      socket.setKeepAlive(true, 5000);
      resolve(socket);
    });
  });
}

function wrap(socket: Socket): RespConnection {
  const pending: Pending[] = [];
  let lost = false;
  let buffer: Buffer = Buffer.alloc(0);
  const fail = (error: Error) => {
    lost = true;
    for (const p of pending.splice(0)) p.reject(error);
  };
  socket.on('data', (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    if (buffer.length > MAX_REPLY + 64) {
      socket.destroy();
      fail(new ConnectionError(`not a Redis server for this lock: an answer of more than ${MAX_REPLY} bytes`));
      return;
    }
    for (;;) {
      let parsed: { reply: Reply | ReplyError; end: number } | null;
      try {
        parsed = parse(buffer, 0);
      } catch (error) {
        socket.destroy();
        fail(error as Error);
        return;
      }
      if (!parsed) return;
      buffer = buffer.subarray(parsed.end);
      const p = pending.shift();
      if (!p) continue;
      if (parsed.reply instanceof ReplyError) p.reject(parsed.reply);
      else p.resolve(parsed.reply);
    }
  });
  socket.on('error', (error) => fail(new ConnectionError(error.message, { cause: error })));
  socket.on('close', () => fail(new ConnectionError('the server closed the connection')));
  return {
    get lost() {
      return lost;
    },
    command(...args) {
      if (lost) return Promise.reject(new ConnectionError('the connection is lost'));
      return new Promise((resolve, reject) => {
        pending.push({ resolve, reject });
        socket.write(encode(args));
      });
    },
    close() {
      lost = true;
      return new Promise((resolve) => {
        if (socket.destroyed) return resolve();
        socket.once('close', () => resolve());
        socket.end();
        // A server that does not answer the FIN is not waited for.
        setTimeout(() => socket.destroy(), 1000).unref();
      });
    },
  };
}

function encode(args: readonly (string | number)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.from(String(arg));
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

// One reply from `at`, or null when the buffer does not hold all of it yet.
function parse(buffer: Buffer, at: number): { reply: Reply | ReplyError; end: number } | null {
  const eol = buffer.indexOf('\r\n', at);
  if (eol < 0) return null;
  const type = String.fromCharCode(buffer[at] as number);
  const line = buffer.toString('utf8', at + 1, eol);
  const next = eol + 2;
  switch (type) {
    case '+':
      return { reply: line, end: next };
    case '-':
      return { reply: new ReplyError(line), end: next };
    case ':':
      if (!/^-?\d{1,20}$/.test(line)) throw notRedis(buffer, at);
      return { reply: Number(line), end: next };
    case '$': {
      const length = size(line, buffer, at);
      if (length < 0) return { reply: null, end: next };
      if (buffer.length < next + length + 2) return null;
      return { reply: buffer.toString('utf8', next, next + length), end: next + length + 2 };
    }
    case '*': {
      const count = size(line, buffer, at);
      if (count < 0) return { reply: null, end: next };
      const items: Reply[] = [];
      let end = next;
      for (let i = 0; i < count; i++) {
        const item = parse(buffer, end);
        if (!item) return null;
        // An error inside an array (a script's) is the whole reply's.
        if (item.reply instanceof ReplyError) {
          const rest = skipRest(buffer, item.end, count - i - 1);
          return rest === null ? null : { reply: item.reply, end: rest };
        }
        items.push(item.reply);
        end = item.end;
      }
      return { reply: items, end };
    }
    default:
      throw notRedis(buffer, at);
  }
}

// A bulk string's length or an array's count: digits, or -1 for nil. Anything else (a NaN
// would read the same bytes again forever) is not RESP.
function size(line: string, buffer: Buffer, at: number): number {
  if (!/^(-1|\d{1,10})$/.test(line)) throw notRedis(buffer, at);
  const n = Number(line);
  if (n > MAX_REPLY) throw new ConnectionError(`not a Redis server for this lock: an answer of ${n} bytes or items, more than ${MAX_REPLY}`);
  return n;
}

function notRedis(buffer: Buffer, at: number): ConnectionError {
  return new ConnectionError(`not a Redis server: an answer began with ${JSON.stringify(buffer.toString('latin1', at, Math.min(at + 16, buffer.length)))}`);
}

function skipRest(buffer: Buffer, at: number, count: number): number | null {
  let end = at;
  for (let i = 0; i < count; i++) {
    const item = parse(buffer, end);
    if (!item) return null;
    end = item.end;
  }
  return end;
}
