import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { collected, cronguard, type Finished, lines, runs, sandbox, start, waitFor } from '../helpers.js';
import { haveRedis, privateRedis } from '../redis-server.js';

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

// A server that answers CLIENT SETNAME with +OK and every later command with `reply`.
async function fakeScripts(reply: string): Promise<number> {
  let commands = 0;
  return fake((socket) => socket.write(commands++ === 0 ? '+OK\r\n' : reply));
}

describe('-l redis against a server that does not run the scripts as Redis does', () => {
  for (const [what, reply] of [
    ['+OK to EVAL (a proxy that ignores it)', '+OK\r\n'],
    ['nil', '$-1\r\n'],
    ['a token that is not a number', '*2\r\n:1\r\n$3\r\nabc\r\n'],
    ['an array too short', '*1\r\n:1\r\n'],
  ] as const) {
    it(`the take answered with ${what}: 69, one line, no stack trace, nothing run`, async () => {
      const port = await fakeScripts(reply);
      const box = sandbox();
      const result = await bounded(['--lock-url', `redis://127.0.0.1:${port}`, '-n', 'shape', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env, 15_000);
      expect(result.code).toBe(69);
      expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(/is unreachable: not a Redis server that runs cronguard's scripts: the take answered/)]);
      expect(lines(box.path('ran'))).toEqual([]);
    }, 30_000);
  }
});

// A waiter whose take is in flight when its connection goes (a server restarting) held
// nothing: it connects again and goes on waiting. The fake server answers the first try (made
// without waiting) "held", drops the wait's first connection on its take, and gives the lock
// at the next.
describe('-l redis: the connection lost with a take in flight while waiting (-w)', () => {
  // A fake server whose connection `which` answers the take as `take` says; its port.
  const fake = async (take: (which: number) => 'held' | 'drop' | 'give'): Promise<{ port: number; connections: () => number }> => {
    let connections = 0;
    server?.close();
    server = createServer((socket) => {
      const which = ++connections;
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('data', (chunk: Buffer) => {
        const command = chunk.toString();
        if (command.includes('SETNAME')) socket.write('+OK\r\n');
        else if (!command.includes("'INCR'")) socket.write(':1\r\n');
        else if (take(which) === 'held') socket.write('*2\r\n:0\r\n$9\r\ndeploying\r\n');
        else if (take(which) === 'drop') socket.destroy();
        else socket.write('*2\r\n:1\r\n$13\r\n1700000000000\r\n');
      });
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as { port: number }).port, connections: () => connections };
  };

  // The first try (made before the wait) loses its connection with its take in flight: the
  // server was reached, so a waiter waits for it; without -w, 69.
  it('the first try’s take: a waiter connects again and runs (exit 0), once; without -w, 69', async () => {
    const { port } = await fake((which) => (which === 1 ? 'drop' : 'give'));
    const box = sandbox();
    const ran = box.path('ran');
    const result = await cronguard(['--lock-url', `redis://127.0.0.1:${port}`, '-w', '30s', '--every-tick', '-n', 'first-take', '--', 'sh', '-c', `echo ran >> ${ran}`], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual(['ran']);
    const { port: again } = await fake(() => 'drop');
    const now = await cronguard(['--lock-url', `redis://127.0.0.1:${again}`, '--every-tick', '-n', 'first-take', '--', 'sh', '-c', `echo ran >> ${ran}`], box.env);
    expect(now.code).toBe(69);
    expect(now.stderr.trim().split('\n')).toHaveLength(1);
    expect(lines(ran)).toEqual(['ran']);
  }, 30_000);

  it('the waiter connects again and runs (exit 0), once', async () => {
    const { port, connections } = await fake((which) => (which === 1 ? 'held' : which === 2 ? 'drop' : 'give'));
    const box = sandbox();
    const ran = box.path('ran');
    const result = await cronguard(['--lock-url', `redis://127.0.0.1:${port}`, '-v', '-w', '30s', '--every-tick', '-n', 'in-flight', '--', 'sh', '-c', `echo ran >> ${ran}`], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/is held; waiting up to 30s for it\n/);
    expect(result.stderr).not.toMatch(/unreachable|connection is lost/);
    expect(connections()).toBeGreaterThanOrEqual(3);
    expect(lines(ran)).toEqual(['ran']);
  }, 30_000);
});

describe('-l redis: a ?ca= that is not a readable file', () => {
  it('a directory, a FIFO, a missing file: 64, one line naming it, no hang, nothing run', async () => {
    const box = sandbox();
    const fifo = box.path('fifo');
    execFileSync('mkfifo', [fifo]);
    for (const [ca, message] of [
      [box.dir, /--lock-url ca=: .* is not a regular file/],
      [fifo, /--lock-url ca=: .*fifo is not a regular file/],
      [box.path('missing.pem'), /--lock-url ca=: cannot read .*missing\.pem \(it does not exist\)/],
    ] as const) {
      const result = await bounded(['--lock-url', `rediss://127.0.0.1:1?ca=${ca}`, '-n', 'ca', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env, 15_000);
      expect(result.code).toBe(64);
      expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(message)]);
    }
    expect(lines(box.path('ran'))).toEqual([]);
  }, 60_000);
});

describe.skipIf(!haveRedis)('-l redis: a server frozen at the release', () => {
  it('the command ended, the server frozen before the release: cronguard exits within seconds, not when the server wakes, the run recorded once', async () => {
    const r = await privateRedis();
    const box = sandbox();
    const started = box.path('started');
    const began = Date.now();
    const run = start(['--lock-url', r.url(), '--lease-ttl', '60s', '--every-tick', '-n', 'frozen-release', '--', 'sh', '-c', `touch ${started}; sleep 1`], box.env);
    await waitFor(() => existsSync(started), 'the command to start');
    const sleeper = r.send('DEBUG', 'SLEEP', '25');
    const result = await run.done;
    const tookMs = Date.now() - began;
    await new Promise((resolve) => sleeper.once('exit', resolve));
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(tookMs).toBeLessThan(15_000);
    expect(runs(box.stateDir).map((row) => row.status)).toEqual(['succeeded']);
    // The release sent before giving up runs when the server wakes: the key is gone.
    expect(r.cli('EXISTS', 'cronguard:0:frozen-release')).toBe('0');
  }, 90_000);
});

describe.skipIf(!haveRedis)('-l redis: odd characters in the user and password', () => {
  it("a user and password with ':' '@' '/' '%', %-escaped: they log in; the user is shown escaped (CRONGUARD_LOCK_URL is a URL that parses back), the password nowhere", async () => {
    const r = await privateRedis();
    r.cli('ACL', 'SETUSER', 'u@x:y', 'on', '>p:a@ss/w%rd', '~cronguard:*', '+@all');
    const box = sandbox();
    const url = `redis://${encodeURIComponent('u@x:y')}:${encodeURIComponent('p:a@ss/w%rd')}@127.0.0.1:${r.port}`;
    const ok = await cronguard(['--lock-url', url, '-v', '--every-tick', '-n', 'odd', '--', 'sh', '-c', 'echo "$CRONGUARD_LOCK_URL"'], box.env);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe(`redis://u%40x%3Ay@127.0.0.1:${r.port}/0\n`);
    expect(decodeURIComponent(new URL(ok.stdout.trim()).username)).toBe('u@x:y');
    for (const secret of [/p:a@ss/, /p%3Aa/i]) {
      expect(ok.stderr).not.toMatch(secret);
      expect(JSON.stringify(runs(box.stateDir))).not.toMatch(secret);
    }
  }, 30_000);
});

describe.skipIf(!haveRedis)('-l redis: the server restarted while an invocation waits (-w)', () => {
  it('the waiter connects again and, the key gone with the restart, runs (exit 0), once', async () => {
    const r = await privateRedis();
    const box = sandbox();
    expect(r.cli('SET', 'cronguard:0:restart-wait', 'deploying', 'PX', '60000')).toBe('OK');
    const ran = box.path('ran');
    const waiter = start(['--lock-url', r.url(), '-v', '-w', '30s', '--every-tick', '-n', 'restart-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], box.env);
    const said = collected(waiter);
    // Waiting, not merely connected: its name is in CLIENT LIST while it is still setting up
    // its connection, and a server lost then is a first connection's failure (69).
    await waitFor(() => said.stderr().includes('is held; waiting up to 30s for it'), 'the waiter to wait');
    await r.stop();
    // Down across several of the waiter's tries (each a refused connection, at most 250 ms
    // apart): it waits for the server as for the lock.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await r.start();
    const result = await waiter.done;
    expect(result.code).toBe(0);
    expect(result.stderr).not.toMatch(/unreachable|connection is lost/);
    expect(lines(ran)).toEqual(['ran']);
  }, 60_000);

  it('a server still down when the wait is over: 69, one line, nothing run', async () => {
    const r = await privateRedis();
    const box = sandbox();
    expect(r.cli('SET', 'cronguard:0:down-wait', 'deploying', 'PX', '60000')).toBe('OK');
    const ran = box.path('ran');
    const waiter = start(['--lock-url', r.url(), '-w', '2s', '-n', 'down-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], box.env);
    await waitFor(() => r.cli('CLIENT', 'LIST').includes('name=cronguard:down-wait'), 'the waiter to connect');
    await r.stop();
    const result = await waiter.done;
    await r.start();
    expect(result.code).toBe(69);
    expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^cronguard: redis redis:\/\/127\.0\.0\.1:\d+\/0 is unreachable: /)]);
    expect(lines(ran)).toEqual([]);
  }, 60_000);
});
