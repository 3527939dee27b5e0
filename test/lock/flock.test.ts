import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, isAlive, lines, runs, sandbox, start, waitFor } from '../helpers.js';


describe('flock: one instance at a time', () => {
  it('of 32 started at once, exactly one runs; the others skip silently (several rounds)', async () => {
    const box = sandbox();
    const log = box.path('record');
    for (let round = 1; round <= 3; round++) {
      const all = await Promise.all(
        Array.from({ length: 32 }, () => cronguard(['-n', 't', '--', fixture('record.sh'), log, '2'], box.env)),
      );
      for (const result of all) expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
      expect(lines(log).filter((l) => l.startsWith('start'))).toHaveLength(round);
      expect(lines(log).filter((l) => l.startsWith('end'))).toHaveLength(round);
      const rows = runs(box.stateDir);
      expect(rows).toHaveLength(round);
      expect(rows[round - 1]).toMatchObject({ status: 'succeeded', overlaps: 31 });
    }
  });

  it('skips with the -E code when the lock is held', async () => {
    const box = sandbox();
    const log = box.path('record');
    const holder = start(['-n', 'e', '--', fixture('record.sh'), log, '2'], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start');
    const skipped = await cronguard(['-n', 'e', '-E', '3', '--', fixture('record.sh'), log], box.env);
    expect(skipped).toMatchObject({ code: 3, stdout: '', stderr: '' });
    expect((await holder.done).code).toBe(0);
    expect(lines(log)).toHaveLength(2);
  });

  it('explains a skip with -v', async () => {
    const box = sandbox();
    const log = box.path('record');
    const holder = start(['-n', 'v', '--', fixture('record.sh'), log, '2'], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start');
    const skipped = await cronguard(['-v', '-n', 'v', '--', 'true'], box.env);
    expect(skipped.code).toBe(0);
    const holderPid = holder.child.pid;
    expect(skipped.stderr).toMatch(new RegExp(`v: flock .*/v\\.lock is held by host \\S+ \\(pid ${holderPid}, run 1, since \\S+Z\\); skipping with exit 0`));
    await holder.done;
  });

  it('waits for the lock with -w, and gives up when the wait runs out', async () => {
    const box = sandbox();
    const log = box.path('record');
    const holder = start(['-n', 'w', '--', fixture('record.sh'), log, '1'], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start');
    const gaveUp = cronguard(['-n', 'w', '-w', '200ms', '-E', '9', '--', 'true'], box.env);
    const waited = await cronguard(['-n', 'w', '-w', '10s', '--', fixture('record.sh'), log], box.env);
    expect((await gaveUp).code).toBe(9);
    expect(waited.code).toBe(0);
    expect((await holder.done).code).toBe(0);
    expect(lines(log)).toEqual([expect.stringMatching(/^start/), expect.stringMatching(/^end/), expect.stringMatching(/^start/), expect.stringMatching(/^end/)]);
  });
});

describe('flock: interoperates with util-linux flock', () => {
  it('skips while `flock FILE` holds the file', async () => {
    const box = sandbox();
    const file = box.path('shared.lock');
    const other = spawn('flock', [file, 'sleep', '2'], { stdio: 'ignore' });
    await waitFor(() => {
      try {
        execFileSync('flock', ['-n', file, 'true']);
        return false;
      } catch {
        return true;
      }
    }, 'util-linux flock to hold the file');
    const result = await cronguard(['--lock-file', file, '-E', '7', '--', 'true'], box.env);
    expect(result.code).toBe(7);
    other.kill();
  });

  it('holds the file so that `flock -n FILE` sees it locked', async () => {
    const box = sandbox();
    const file = box.path('shared.lock');
    const log = box.path('record');
    const run = start(['--lock-file', file, '--', fixture('record.sh'), log, '2'], box.env);
    await waitFor(() => lines(log).length > 0, 'cronguard to start the command');
    expect(() => execFileSync('flock', ['-n', file, 'true'])).toThrow();
    await run.done;
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
    const first = start(['-n', 'k', '--', fixture('record.sh'), log, '2'], box.env);
    await waitFor(() => lines(log).length > 0 && !!runs(box.stateDir)[0]?.child_pid, 'the command to start');
    first.child.kill('SIGKILL');
    await first.done;
    const commandPid = runs(box.stateDir)[0]?.child_pid as number;
    expect(isAlive(commandPid)).toBe(true);

    const during = await cronguard(['-n', 'k', '-E', '9', '--', fixture('record.sh'), log, '0'], box.env);
    expect(during.code).toBe(9);
    expect(lines(log).filter((l) => l.startsWith('start'))).toHaveLength(1);

    await waitFor(() => lines(log).some((l) => l.startsWith('end')), 'the orphaned command to finish', 10_000);
    await waitFor(() => !isAlive(commandPid), 'the orphaned command to exit');
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
