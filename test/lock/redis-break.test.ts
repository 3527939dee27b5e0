import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Finished, lines, sandbox, start } from '../helpers.js';

// -l redis against what nobody expects of a Redis server (issue 39, an adversary's review):
// replies that are not RESP, replies without end.

let server: Server | null = null;
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(null));
  server = null;
});

// A server that answers every command with `answer(socket)`.
async function fake(answer: (socket: Socket) => void): Promise<number> {
  server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('data', () => answer(socket));
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

// The binary, SIGKILLed if it has not ended within `ms` (a process spinning in a loop
// ignores SIGTERM).
async function bounded(args: string[], env: NodeJS.ProcessEnv, ms: number): Promise<Finished & { ms: number }> {
  const began = Date.now();
  const started = start(args, env);
  const timer = setTimeout(() => started.child.kill('SIGKILL'), ms);
  const result = await started.done.finally(() => clearTimeout(timer));
  return { ...result, ms: Date.now() - began };
}

describe('-l redis against a server that does not speak RESP', () => {
  for (const [what, reply] of [
    ['a bulk string whose length is not a number', '$abc\r\n'],
    ['an array whose count is not a number', '*x\r\n'],
    ['a fractional length', '$1.5\r\nab\r\n'],
    ['an integer that is not one', ':12ab\r\n'],
  ] as const) {
    it(`${what}: 69, one line, nothing run, no hang`, async () => {
      const port = await fake((socket) => socket.write(reply));
      const box = sandbox();
      const result = await bounded(['--lock-url', `redis://127.0.0.1:${port}`, '-n', 'garbage', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env, 15_000);
      expect(result).toMatchObject({ code: 69, signal: null });
      expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^cronguard: redis redis:\/\/127\.0\.0\.1:\d+\/0 is unreachable: not a Redis server/)]);
      expect(lines(box.path('ran'))).toEqual([]);
    }, 30_000);
  }

  it('a reply without end (a huge length, then bytes without stop): 69 promptly, one line, nothing buffered without end', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const port = await fake((socket) => {
      socket.write('$2000000000\r\n');
      const pump = () => {
        if (!socket.destroyed && socket.write(chunk)) setImmediate(pump);
        else if (!socket.destroyed) socket.once('drain', pump);
      };
      pump();
    });
    const box = sandbox();
    const result = await bounded(['--lock-url', `redis://127.0.0.1:${port}`, '-n', 'huge', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env, 15_000);
    expect(result).toMatchObject({ code: 69, signal: null });
    expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(/is unreachable: not a Redis server for this lock/)]);
    expect(result.ms).toBeLessThan(4000);
    expect(lines(box.path('ran'))).toEqual([]);
  }, 30_000);
});
