import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach } from 'vitest';
import { databaseUrl } from './pg-helpers.js';

const servers: Server[] = [];
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

function track(socket: Socket, own: Set<Socket>): Socket {
  for (const set of [sockets, own]) {
    set.add(socket);
    socket.on('close', () => set.delete(socket));
  }
  socket.on('error', () => {});
  return socket;
}

async function listen(own: Set<Socket>, onConnection: (client: Socket) => void): Promise<string> {
  const server = createServer((client) => onConnection(track(client, own)));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(databaseUrl());
  url.port = String((server.address() as { port: number }).port);
  return url.toString();
}

export interface CuttingProxy {
  readonly url: string;
  // Resolves once the statement got where the proxy stops it.
  readonly reached: Promise<void>;
  // Closes every connection (the client sees its connection lost).
  cut(): void;
  // 'delay': sends the statement held back on to the server, and all that follows it;
  // 'delay-reply': sends the client the reply held back, and all that follows it.
  pass(): void;
  // How many statements holding the marker clients have sent through it so far.
  sent(): number;
}

// A proxy in front of the test server that stops the first statement whose text holds
// `marker`: at the request (held unanswered until cut()), at the reply (the server ran and
// committed it, and the connection is cut before the client hears), or delayed (held back,
// the connection open, until pass(): as a slow network or server would), or its reply
// delayed so (the server ran it; the client hears late, as a starved client would). Every other
// statement, and every connection after the cut, passes.
export async function cuttingProxy(marker: string, at: 'request' | 'reply' | 'delay' | 'delay-reply'): Promise<CuttingProxy> {
  const target = new URL(databaseUrl());
  let reach: () => void = () => {};
  const reached = new Promise<void>((resolve) => (reach = resolve));
  let armed = true;
  let sent = 0;
  const own = new Set<Socket>();
  const cut = () => {
    for (const socket of own) socket.destroy();
  };
  // What a delayed connection holds back, sent on by pass().
  let pass = () => {};
  const url = await listen(own, (client) => {
    const upstream = track(connect(Number(target.port || 5432), target.hostname), own);
    let stage: 'before' | 'sent' | 'stopped' | 'delayed' | 'replying' | 'reply-held' = 'before';
    let seen = '';
    const delayed: (string | Buffer)[] = [];
    client.on('data', (data) => {
      if (stage === 'stopped') return;
      if (stage === 'delayed') return void delayed.push(data);
      if (data.toString('latin1').includes(marker)) sent++;
      seen = (seen + data.toString('latin1')).slice(-4096);
      if (armed && stage === 'before' && seen.includes(marker)) {
        armed = false;
        stage = at === 'request' ? 'stopped' : at === 'reply' ? 'sent' : at === 'delay' ? 'delayed' : 'replying';
        if (at === 'delay') {
          delayed.push(data);
          pass = () => {
            stage = 'before';
            for (const held of delayed.splice(0)) upstream.write(held);
          };
        }
        if (at === 'request' || at === 'delay') return reach();
      }
      upstream.write(data);
    });
    upstream.on('data', (data) => {
      if (stage === 'stopped') return;
      if (stage === 'sent') {
        stage = 'stopped';
        client.destroy();
        upstream.destroy();
        return reach();
      }
      if (stage === 'replying') {
        stage = 'reply-held';
        pass = () => {
          stage = 'before';
          for (const held of delayed.splice(0)) client.write(held);
        };
        reach();
      }
      if (stage === 'reply-held') return void delayed.push(data);
      client.write(data);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  });
  return { url, reached, cut, pass: () => pass(), sent: () => sent };
}

export interface FakeServer {
  readonly url: string;
  // Resolves once `count` connections have sent their startup message.
  startups(count: number): Promise<void>;
}

// A server that accepts connections, reads what they send and answers nothing (as one that
// hangs); or (`busy`) answers every login with "too many clients" (SQLSTATE 53300).
export async function fakeServer(busy: boolean): Promise<FakeServer> {
  let started = 0;
  const waiting: { count: number; resolve: () => void }[] = [];
  const url = await listen(new Set(), (client) => {
    client.once('data', () => {
      started++;
      for (const w of waiting.filter((w) => started >= w.count)) w.resolve();
      if (busy) client.end(errorResponse('53300', 'sorry, too many clients already'));
    });
  });
  return {
    url,
    startups: (count) => new Promise((resolve) => (started >= count ? resolve() : waiting.push({ count, resolve }))),
  };
}

function errorResponse(code: string, message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`);
  const head = Buffer.alloc(5);
  head.write('E');
  head.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}
