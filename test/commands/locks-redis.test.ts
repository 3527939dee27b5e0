import { writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, runs, sandbox, start, waitFor } from '../helpers.js';
import { haveRedis, privateRedis, REDIS_SERVER } from '../redis-server.js';
import { holdSlots } from '../slots.js';

const locksOf = async (env: NodeJS.ProcessEnv) => {
  const result = await cronguard(['locks', '--json'], env);
  expect(result).toMatchObject({ code: 0, stderr: '' });
  return JSON.parse(result.stdout) as Record<string, unknown>[];
};

// Starts `cronguard ARGS -- hold.sh` and waits until the command runs; release() lets it end.
async function holding(job: string, env: NodeJS.ProcessEnv, dir: string) {
  const log = `${dir}/${job}-hold`;
  const barrier = `${log}.go`;
  const run = start(['-n', job, '--', fixture('hold.sh'), log, barrier], env);
  await waitFor(() => lines(log).length > 0, 'the command to start');
  const release = () => {
    writeFileSync(barrier, '');
    return run.done;
  };
  return { run, barrier, release };
}

describe.skipIf(!haveRedis)(haveRedis ? 'cronguard locks: a Redis lock of this host' : `cronguard locks: a Redis lock of this host (skipped: ${REDIS_SERVER} is absent)`, () => {
  it('is listed from its running row while its wrapper runs', async () => {
    const box = sandbox();
    const redis = await privateRedis();
    const env = { ...box.env, CRONGUARD_LOCK_URL: redis.url() };
    const held = await holding('cache', env, box.dir);
    const json = await locksOf(env);
    const table = await cronguard(['locks'], env);
    await held.release();
    const after = await locksOf(env);
    const [run] = runs(box.stateDir);
    expect(json).toEqual([{ job: 'cache', lock: 'redis', key: 'cronguard:0:cache', host: hostname(), pid: run?.pid, run_id: 1, since: run?.started_at, holder_pid: null, verified: false }]);
    expect(table.stdout).toMatch(/^JOB\s+LOCK\s+HOST\s+PID\s+SINCE\s+RUN\s+NOTE\ncache\s+redis\s.*\s1\s+per run log, its wrapper runs\n$/);
    expect(after).toEqual([]);
  });

  it('with --max-running, the key of each slot is listed, which slot of how many', async () => {
    const box = sandbox();
    const redis = await privateRedis();
    const env = { ...box.env, CRONGUARD_LOCK_URL: redis.url() };
    const slotted = await holdSlots('warm', 2, 2, env, box.dir);
    const json = await locksOf(env);
    const table = await cronguard(['locks'], env);
    await slotted.release();
    const [first, second] = runs(box.stateDir);
    const entry = { job: 'warm', lock: 'redis', host: hostname(), holder_pid: null, verified: false, max_running: 2 };
    expect(json).toEqual([
      { ...entry, key: 'cronguard:0:warm', pid: first?.pid, run_id: 1, since: first?.started_at, slot: 0 },
      { ...entry, key: 'cronguard:0:warm#1', pid: second?.pid, run_id: 2, since: second?.started_at, slot: 1 },
    ]);
    expect(table.stdout).toMatch(/\nwarm\s+redis\s.*\s2\s+1 of 2\s+2 of 2 running; per run log, its wrapper runs\n$/);
  });

  it('is not listed once its wrapper is gone (its key runs out unrenewed)', async () => {
    const box = sandbox();
    const redis = await privateRedis();
    const env = { ...box.env, CRONGUARD_LOCK_URL: redis.url() };
    const held = await holding('killed', env, box.dir);
    held.run.child.kill('SIGKILL');
    await held.run.done;
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'running', lock_backend: 'redis' });
    expect(await locksOf(env)).toEqual([]);
    writeFileSync(held.barrier, '');
  });
});
