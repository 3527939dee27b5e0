import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  cronguard,
  fixture,
  isAlive,
  lines,
  release,
  runs,
  sandbox,
  serialRuns,
  start,
  startMany,
  waitFor,
} from '../helpers.js';


describe('flock: one instance at a time', () => {
  it('of 32 started at once, exactly one runs; the others skip silently (several rounds)', async () => {
    const box = sandbox();
    const log = box.path('record');
    for (let round = 1; round <= 3; round++) {
      const barrier = box.path(`barrier-${round}`);
      const many = startMany(32, ['-n', 't', '--', fixture('hold.sh'), log, barrier], box.env);
      // Whoever got the lock holds it until the barrier exists, so every other one met it held.
      await waitFor(() => many.exited() === 31, 'all but one invocation to skip');
      await waitFor(() => lines(log).length > 2 * (round - 1), 'the one holding the lock to start its command');
      expect(lines(log).slice(2 * (round - 1))).toEqual([expect.stringMatching(/^start \d+$/)]);
      release(barrier);
      for (const result of await many.done) expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
      expect(serialRuns(log)).toBe(round);
      const rows = runs(box.stateDir);
      expect(rows).toHaveLength(round);
      expect(rows[round - 1]).toMatchObject({ status: 'succeeded', overlaps: 31 });
    }
  });

  it('skips with the -E code when the lock is held', async () => {
    const box = sandbox();
    const log = box.path('record');
    const barrier = box.path('barrier');
    const holder = start(['-n', 'e', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start');
    const skipped = await cronguard(['-n', 'e', '-E', '3', '--', fixture('record.sh'), log], box.env);
    expect(skipped).toMatchObject({ code: 3, stdout: '', stderr: '' });
    release(barrier);
    expect((await holder.done).code).toBe(0);
    expect(serialRuns(log)).toBe(1);
  });

  it('explains a skip with -v', async () => {
    const box = sandbox();
    const log = box.path('record');
    const barrier = box.path('barrier');
    const holder = start(['-n', 'v', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start');
    const skipped = await cronguard(['-v', '-n', 'v', '--', 'true'], box.env);
    expect(skipped.code).toBe(0);
    const holderPid = holder.child.pid;
    expect(skipped.stderr).toMatch(new RegExp(`v: flock .*/v\\.lock is held by host \\S+ \\(pid ${holderPid}, run 1, since \\S+Z\\); skipping with exit 0`));
    release(barrier);
    expect((await holder.done).code).toBe(0);
  });

  it('waits for the lock with -w, and gives up when the wait runs out', async () => {
    const box = sandbox();
    const log = box.path('record');
    const barrier = box.path('barrier');
    const holder = start(['-n', 'w', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start');
    const gaveUp = await cronguard(['-n', 'w', '-w', '200ms', '-E', '9', '--', 'true'], box.env);
    expect(gaveUp.code).toBe(9);
    // -v names the run log right before the first attempt at the lock: from then on, the
    // waiter is waiting. (Its -w only turns a hang into a failure.)
    const waiter = start(['-v', '-n', 'w', '-w', '90s', '--', fixture('record.sh'), log], box.env);
    let said = '';
    waiter.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => said.includes('run log in'), 'the waiter to try the lock');
    release(barrier);
    expect((await holder.done).code).toBe(0);
    expect((await waiter.done).code).toBe(0);
    expect(serialRuns(log)).toBe(2);
    // Invoked while the lock was held, it started only after: started_at is when it got the
    // lock, so the log never shows two runs overlapping that did not.
    const [held, waited] = runs(box.stateDir);
    expect(Date.parse(waited?.invoked_at as string)).toBeLessThanOrEqual(Date.parse(held?.finished_at as string));
    expect(Date.parse(waited?.started_at as string)).toBeGreaterThanOrEqual(Date.parse(held?.finished_at as string));
  });
});

describe('flock: interoperates with util-linux flock', () => {
  it('skips while `flock FILE` holds the file', async () => {
    const box = sandbox();
    const file = box.path('shared.lock');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const other = spawn('flock', [file, fixture('hold.sh'), log, barrier], { stdio: 'ignore' });
    const otherExited = new Promise((resolve) => other.on('close', resolve));
    await waitFor(() => lines(log).length > 0, 'util-linux flock to run its command');
    const result = await cronguard(['--lock-file', file, '-E', '7', '--', 'true'], box.env);
    expect(result.code).toBe(7);
    release(barrier);
    expect(await otherExited).toBe(0);
  });

  it('holds the file so that `flock -n FILE` sees it locked', async () => {
    const box = sandbox();
    const file = box.path('shared.lock');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const run = start(['--lock-file', file, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'cronguard to start the command');
    expect(() => execFileSync('flock', ['-n', file, 'true'])).toThrow();
    release(barrier);
    expect((await run.done).code).toBe(0);
    expect(() => execFileSync('flock', ['-n', file, 'true'])).not.toThrow();
  });

  it('never truncates or rewrites an existing lock file', async () => {
    const box = sandbox();
    const file = box.path('has-content.lock');
    writeFileSync(file, 'keep me\n');
    await cronguard(['--lock-file', file, '--', 'true'], box.env);
    expect(readFileSync(file, 'utf8')).toBe('keep me\n');
  });
});

describe('flock: the wrapper killed with SIGKILL', () => {
  it('keeps the lock while the command lives, then the next run marks the old row abandoned', async () => {
    const box = sandbox();
    const log = box.path('record');
    const barrier = box.path('barrier');
    const first = start(['-n', 'k', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0 && !!runs(box.stateDir)[0]?.child_pid, 'the command to start');
    first.child.kill('SIGKILL');
    await first.done;
    const commandPid = runs(box.stateDir)[0]?.child_pid as number;
    expect(isAlive(commandPid)).toBe(true);

    const during = await cronguard(['-n', 'k', '-E', '9', '--', fixture('record.sh'), log], box.env);
    expect(during.code).toBe(9);
    expect(lines(log)).toEqual([`start ${commandPid}`]);

    release(barrier);
    await waitFor(() => !isAlive(commandPid), 'the orphaned command to finish');
    expect(serialRuns(log)).toBe(1);
    const after = await cronguard(['-n', 'k', '--', 'true'], box.env);
    expect(after.code).toBe(0);
    const rows = runs(box.stateDir);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({ status: 'abandoned', overlaps: 1 });
    expect(rows[0]?.error).toMatch(/vanished/);
    expect(rows[0]?.finished_at).toBeTruthy();
    expect(rows[1]).toMatchObject({ status: 'succeeded' });
  });
});
