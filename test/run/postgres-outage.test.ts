import { existsSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard, fixture, isAlive, lines, spooled, start, waitFor } from '../helpers.js';
import { type PgProxy, pgRuns, pgSandbox, proxy } from '../pg-helpers.js';

let current: PgProxy | null = null;
afterEach(async () => {
  await current?.close();
  current = null;
});

// The server seen through a proxy that can be stopped, restarted and frozen.
describe('postgres outages', () => {
  it('server stopped: the postgres lock runs nothing (69); a flock job spools, and a later run delivers', async () => {
    const box = pgSandbox();
    const job = box.job('outage');
    current = await proxy();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: current.url };
    expect((await cronguard(['migrate'], env)).code).toBe(0);
    await current.stop();

    const locked = await cronguard(['-n', job, '--', 'touch', box.path('ran')], env);
    expect(locked.code).toBe(69);
    expect(locked.stderr).toMatch(/^cronguard: cannot reach PostgreSQL at postgres@127\.0\.0\.1:\d+\/\w+: ECONNREFUSED\n$/);
    expect(existsSync(box.path('ran'))).toBe(false);

    const down = await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'while down'], env);
    expect(down.code).toBe(0);
    expect(down.stdout).toBe('while down\n');
    expect(down.stderr).toMatch(/unavailable .* records go to .*spool/);
    expect(spooled(box.stateDir)).toHaveLength(1);

    await current.start();
    const after = await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'back up'], env);
    expect(after).toMatchObject({ code: 0, stderr: '' });
    expect(spooled(box.stateDir)).toEqual([]);
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.output])).toEqual([
      ['succeeded', 'while down\n'],
      ['succeeded', 'back up\n'],
    ]);
  });

  it('a server that takes the connection and never answers: one line naming connect_timeout, 69, nothing run, whichever database lock', async () => {
    const box = pgSandbox();
    const held: Socket[] = [];
    const silent = createServer((socket) => held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    try {
      const env = { ...box.env, CRONGUARD_DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/test?connect_timeout=2` };
      for (const lock of ['postgres', 'lease']) {
        const ran = box.path(`ran-${lock}`);
        const result = await cronguard(['-l', lock, '-n', box.job(lock), '--', 'touch', ran], env);
        expect(result.code).toBe(69);
        expect(result.stderr).toBe(`cronguard: cannot reach PostgreSQL at postgres@127.0.0.1:${port}/test: no answer within its connect_timeout\n`);
        expect(existsSync(ran)).toBe(false);
      }
    } finally {
      for (const socket of held) socket.destroy();
      silent.close();
    }
  });

  it('network cut mid-run: the heartbeat notices, the command is terminated, exit 75', async () => {
    const box = pgSandbox();
    const job = box.job('cut');
    const pids = box.path('pids');
    current = await proxy();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: current.url };
    const run = start(['-n', job, '--kill-after', '1s', '--', fixture('tree.sh'), pids], env);
    await waitFor(() => lines(pids).length === 3, 'the command to start');
    current.freeze();
    const result = await run.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(/lock lost: .*(stopped answering|heartbeat)/);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    // The outcome could not reach the database through the frozen network: it is spooled.
    expect(spooled(box.stateDir)).toHaveLength(1);
  });
});
