import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cronguard, runs, sandbox } from '../helpers.js';
import { holdSlots } from '../slots.js';

const locksOf = async (env: NodeJS.ProcessEnv) => {
  const result = await cronguard(['locks', '--json'], env);
  expect(result).toMatchObject({ code: 0, stderr: '' });
  return JSON.parse(result.stdout) as Record<string, unknown>[];
};

describe('cronguard locks: --max-running', () => {
  it('lists each slot held, which of how many, and how many of the job run', async () => {
    const box = sandbox();
    const held = await holdSlots('report', 3, 2, box.env, box.dir);
    const single = await holdSlots('single', 1, 1, box.env, box.dir);
    const json = await locksOf(box.env);
    const table = await cronguard(['locks'], box.env);
    await Promise.all([held.release(), single.release()]);
    const [first, second, third] = runs(box.stateDir);
    expect(json).toEqual([
      { job: 'report', lock: 'flock', key: `${box.lockDir}/report.lock`, host: hostname(), pid: first?.pid, run_id: 1, since: first?.started_at, slot: 0, max_running: 3, holder_pid: first?.pid, verified: true },
      { job: 'report', lock: 'flock', key: `${box.lockDir}/report.lock#1`, host: hostname(), pid: second?.pid, run_id: 2, since: second?.started_at, slot: 1, max_running: 3, holder_pid: second?.pid, verified: true },
      // A job without slots has none in its entry, as before.
      { job: 'single', lock: 'flock', key: `${box.lockDir}/single.lock`, host: hostname(), pid: third?.pid, run_id: 3, since: third?.started_at, holder_pid: third?.pid, verified: true },
    ]);
    const [header, ...rows] = table.stdout.trim().split('\n');
    expect(header).toMatch(/^JOB\s+LOCK\s+HOST\s+PID\s+SINCE\s+RUN\s+SLOT\s+NOTE$/);
    expect(rows[0]).toMatch(/^report\s+flock\s.*\s1\s+0 of 3\s+2 of 3 running$/);
    expect(rows[1]).toMatch(/^report\s+flock\s.*\s2\s+1 of 3\s+2 of 3 running$/);
    expect(rows[2]).toMatch(/^single\s+flock\s.*\s3\s+-$/);
  });

  it('shows no SLOT column when no job holding a lock has slots', async () => {
    const box = sandbox();
    const single = await holdSlots('single', 1, 1, box.env, box.dir);
    const table = await cronguard(['locks'], box.env);
    await single.release();
    expect(table.stdout).toMatch(/^JOB\s+LOCK\s+HOST\s+PID\s+SINCE\s+RUN\s+NOTE\nsingle\s+flock\s/);
  });
});

describe('cronguard locks: a slot held by a --no-log run', () => {
  it('is listed from its lock file, with the slot its name gives', async () => {
    const box = sandbox();
    const held = await holdSlots('quiet', 3, 2, box.env, box.dir, ['--no-log']);
    const locked = await holdSlots('locked', 2, 2, box.env, box.dir, ['--no-log', '-l', 'lockfile']);
    const json = await locksOf(box.env);
    const table = await cronguard(['locks'], box.env);
    await Promise.all([held.release(), locked.release()]);
    const entry = { host: hostname(), pid: null, run_id: null, since: null, verified: true };
    // Those of a job come in the lock directory's order.
    expect(json.sort((a, b) => String(a.key).localeCompare(String(b.key)))).toEqual([
      { ...entry, job: 'locked', lock: 'lockfile', key: `${box.lockDir}/locked.lockdir`, holder_pid: locked.copies[0]?.child.pid },
      { ...entry, job: 'locked', lock: 'lockfile', key: `${box.lockDir}/locked#1.lockdir`, holder_pid: locked.copies[1]?.child.pid, slot: 1 },
      // Its slot 0 is the job's own lock file: a run without --max-running would hold the same.
      { ...entry, job: 'quiet', lock: 'flock', key: `${box.lockDir}/quiet.lock`, holder_pid: held.copies[0]?.child.pid },
      { ...entry, job: 'quiet', lock: 'flock', key: `${box.lockDir}/quiet.lock#1`, holder_pid: held.copies[1]?.child.pid, slot: 1 },
    ]);
    expect(table.stdout).toMatch(/\nquiet\s+flock\s.*\s-\s+1\s+no run row\n$/);
  });
});
