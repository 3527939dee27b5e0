import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { besides, cronguard, fixture, lines, runs, type Sandbox, sandbox, start, waitFor } from '../helpers.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

// The lockfile lease lives as long as cronguard refreshes it; a cronguard that is stopped
// (SIGSTOP, a frozen VM) cannot, and its command must not outlive the lease.
describe('a lockfile holder that stalls', () => {
  // On a busy machine, where every `sleep 1` of the watchdog's timer takes 2.5 s: a timer
  // that counted its rounds as seconds would let the command outlive the lease.
  const busy = (box: Sandbox): NodeJS.ProcessEnv => {
    mkdirSync(box.path('bin'));
    writeFileSync(box.path('bin/sleep'), '#!/bin/sh\n[ "$1" = 1 ] && exec /bin/sleep 2.5\nexec /bin/sleep "$@"\n', { mode: 0o755 });
    return { ...box.env, PATH: `${box.path('bin')}:${box.env.PATH}` };
  };
  it.each([
    ['', (box: Sandbox) => box.env],
    [' (on a machine too busy for its timer to wake each second)', busy],
  ])('has its command stopped before the lease can be taken over; it exits 75 once it runs again%s', async (_, environment) => {
    const box = sandbox();
    const env = environment(box);
    const log = box.path('log');
    const holder = start(['-l', 'lockfile', '-n', 'stall', '--', fixture('hold.sh'), log, box.path('never')], env);
    await waitFor(() => lines(log).length > 0, 'the command to start');
    const command = Number(lines(log)[0]?.split(' ')[1]);
    // Stopped once it has recorded the command's pid, not in the middle of that write: a
    // holder stopped inside an SQLite write keeps the log locked, and the waiter's record of
    // its start then waits out the busy timeout, longer than its own lease may go unrefreshed
    // (it then starts nothing, 75; seen once on Node.js 24 in CI).
    await waitFor(() => runs(box.stateDir)[0]?.child_pid != null, 'the command\'s pid to be recorded');
    holder.child.kill('SIGSTOP');
    try {
      // A waiter takes the lease once it is stale, and looks whether the first command runs.
      const waiter = await cronguard(['-l', 'lockfile', '-w', '10m', '-n', 'stall', '--', ...besides(command, box.path('seen'))], env);
      expect(waiter).toMatchObject({ code: 0, stderr: '' });
      expect(lines(box.path('seen'))).toEqual(['alone']);
    } finally {
      holder.child.kill('SIGCONT');
    }
    const result = await holder.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(/^cronguard: stall: lock lost: lockfile \S+ the lease lapsed, not refreshed for [\d.]+s \(cronguard was stopped or stalled\); command terminated after /);
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['lock_lost', 'succeeded']);
  });

  it('between taking the lease and starting the command starts nothing once the lease is gone', async () => {
    const box = sandbox();
    expect((await cronguard(['-l', 'lockfile', '-n', 'late', '--', 'true'], box.env)).code).toBe(0);
    // The run log held by another writer keeps the holder in its admission, the lease taken.
    const db = new Database(join(box.stateDir, 'cronguard.db'));
    db.prepare('BEGIN IMMEDIATE').run();
    const container = join(box.lockDir, 'late.lockdir');
    const holder = start(['-l', 'lockfile', '-n', 'late', '--', 'touch', box.path('ran')], box.env);
    const mine = (name: string) => readFileSync(join(container, name), 'utf8').endsWith(` ${holder.child.pid}\n`);
    // Past its last look at the container: the holder removes its predecessor only once it
    // checked that nothing overtook its new epoch. An epoch written before that look would
    // make it find the lock held, and skip (0; seen once in CI).
    const alone = () => {
      const names = readdirSync(container);
      return names.length === 1 && mine(names[0] as string);
    };
    await waitFor(alone, 'the holder to take the lease');
    // Meanwhile its lease went stale and another host took the next epoch.
    const epoch = Math.max(...readdirSync(container).map((name) => Number(name.slice('epoch-'.length))));
    writeFileSync(join(container, `epoch-${epoch + 1}`), 'elsewhere 1\n');
    db.prepare('ROLLBACK').run();
    db.close();
    const result = await holder.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(
      /^cronguard: late: lock lost before the command started \(lockfile \S+ was taken over: epoch \d+ overtook ours \(\d+\)\); nothing ran \(run 2; cronguard logs 2\)\n$/,
    );
    expect(existsSync(box.path('ran'))).toBe(false);
    expect(runs(box.stateDir).map((r) => [r.status, r.child_pid])).toEqual([
      ['succeeded', expect.any(Number)],
      ['lock_lost', null],
    ]);
  });
});
