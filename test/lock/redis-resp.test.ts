import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ConnectionError, connectRedis, ReplyError } from '../../src/lock/redis/resp.js';
import { resolveRedisTarget } from '../../src/lock/redis/target.js';

// The lock's own RESP client (lock/redis/resp.ts) against a fake server that answers each
// command with the reply the test gives, one byte at a time: every reply must be read whole
// however the bytes arrive.
let server: Server | null = null;
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(null));
  server = null;
});

// A server that answers the Nth command with replies[N] (CLIENT SETNAME first), byte by byte.
async function fake(replies: string[], onCommand: (socket: Socket) => void = () => {}): Promise<number> {
  server = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', async (data) => {
      // Each command is one array: count them by their leading '*' at a line's start.
      const count = data.toString('latin1').split('\r\n').filter((l) => l.startsWith('*')).length;
      for (let i = 0; i < count; i++) {
        const reply = replies.shift() ?? '+OK\r\n';
        for (const byte of Buffer.from(reply)) {
          socket.write(Buffer.from([byte]));
          await new Promise((resolve) => setImmediate(resolve));
        }
        onCommand(socket);
      }
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

const target = (port: number, auth = '') => resolveRedisTarget({ value: `redis://${auth}127.0.0.1:${port}`, from: '--lock-url' });

describe('the RESP client', () => {
  it('reads integers, strings, nil and nested arrays, however the bytes arrive', async () => {
    const port = await fake(['+OK\r\n', ':42\r\n', '$5\r\nhé!!\r\n', '$-1\r\n', '*2\r\n:1\r\n*2\r\n$3\r\nabc\r\n$-1\r\n', '*-1\r\n']);
    const c = await connectRedis(target(port), 'cronguard:t', AbortSignal.timeout(5000));
    expect(await c.command('INCR', 'x')).toBe(42);
    expect(await c.command('GET', 'x')).toBe('hé!!');
    expect(await c.command('GET', 'y')).toBe(null);
    expect(await c.command('EVAL', 's', 0)).toEqual([1, ['abc', null]]);
    expect(await c.command('EVAL', 's', 0)).toBe(null);
    await c.close();
  });

  it('an error reply fails its command only; the next still works', async () => {
    const port = await fake(['+OK\r\n', '-NOSCRIPT No matching script\r\n', ':7\r\n']);
    const c = await connectRedis(target(port), 'cronguard:t', AbortSignal.timeout(5000));
    const failed = await c.command('EVALSHA', 'x', 0).catch((e) => e);
    expect(failed).toBeInstanceOf(ReplyError);
    expect(failed).toMatchObject({ code: 'NOSCRIPT', message: 'NOSCRIPT No matching script' });
    expect(await c.command('INCR', 'x')).toBe(7);
    await c.close();
  });

  it('a refused AUTH fails the connection with the reply (WRONGPASS)', async () => {
    const port = await fake(['-WRONGPASS invalid username-password pair or user is disabled.\r\n', '+OK\r\n']);
    const failed = await connectRedis(target(port, 'u:p@'), 'cronguard:t', AbortSignal.timeout(5000)).catch((e) => e);
    expect(failed).toBeInstanceOf(ReplyError);
    expect(failed.code).toBe('WRONGPASS');
  });

  it('a server that goes away fails what is pending, and every later command', async () => {
    const port = await fake(['+OK\r\n', ''], (socket) => socket.destroy());
    const c = await connectRedis(target(port), 'cronguard:t', AbortSignal.timeout(5000));
    await expect(c.command('GET', 'x')).rejects.toBeInstanceOf(ConnectionError);
    expect(c.lost).toBe(true);
    await expect(c.command('GET', 'x')).rejects.toBeInstanceOf(ConnectionError);
  });

  it('a server that never answers: connecting gives up when its signal says so', async () => {
    server = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const started = Date.now();
    await expect(connectRedis(target(port), 'cronguard:t', AbortSignal.timeout(300))).rejects.toThrow(/no answer within the time allowed/);
    expect(Date.now() - started).toBeLessThan(3000);
  });
});
