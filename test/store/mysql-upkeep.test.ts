import { describe, expect, it } from 'vitest';
import type { SpooledRun } from '../../src/store/spool-record.js';
import { monotonicMs } from '../../src/util/time.js';
import { mysqlQuery } from '../mysql-helpers.js';
import { admitted, freshStore, newRun, outcome, RULES } from './mysql-stores.js';

// A spooled record of a run of `job` that started `ageMs` ago and ended `status`.
function record(job: string, ageMs: number, status: 'succeeded' | 'failed' | 'abandoned' = 'succeeded', key = `k-${job}-${ageMs}-${status}`): SpooledRun {
  const startedAt = new Date(Date.now() - ageMs);
  const run = newRun(job, { startedAt, invokedAt: startedAt, runKey: key });
  return {
    id: null,
    run: { ...run, startedAt: startedAt.toISOString(), invokedAt: startedAt.toISOString(), tick: null },
    childPid: 77,
    outcome: status === 'abandoned' ? null : {
      status, finishedAt: new Date(startedAt.getTime() + 1000).toISOString(), durationMs: 1000, exitCode: status === 'succeeded' ? 0 : 1,
      signal: null, output: 'spooled\n', outputTruncated: false, error: null,
    },
  };
}

const DAY = 86_400_000;

describe('mysql run log: spooled records, retention, tasks', () => {
  it('imports a record once however often it is delivered, and settles its claims', async () => {
    const { store, job } = await freshStore();
    const name = job('spool');
    const request = await store.addRequest({ job: name, args: ['x'], notBefore: new Date(), requestedBy: null });
    const other = await store.addRequest({ job: name, args: [], notBefore: new Date(), requestedBy: null });
    const claim = await store.admit(newRun(name), { ...RULES, batch: true });
    if (!claim.admitted) throw new Error('refused');
    const base = record(name, 5000);
    const row = await store.getRun(claim.runId);
    const delivered: SpooledRun = { ...base, run: { ...base.run, runKey: row?.run_key as string, startedAt: row?.started_at as string, invokedAt: row?.invoked_at as string }, served: [request], final: true };
    const first = await store.importRun(delivered);
    expect(first).toBe(claim.runId);
    expect(await store.importRun(delivered)).toBe(first);
    expect(await store.listRuns({ jobs: [name], limit: 10 })).toHaveLength(1);
    expect(await store.getRun(first)).toMatchObject({ status: 'succeeded', child_pid: 77, output: 'spooled\n' });
    expect(await store.getRequest(request)).toMatchObject({ status: 'succeeded', run_id: first });
    expect(await store.getRequest(other)).toMatchObject({ status: 'pending', run_id: null });
    // A stale `abandoned` for a run that did finish changes nothing.
    expect(await store.importRun({ ...delivered, outcome: null })).toBe(first);
    expect(await store.getRun(first)).toMatchObject({ status: 'succeeded' });
    expect((await store.jobStatus(name))[0]?.runs_total).toEqual({ succeeded: 1 });
  });

  it('imports a record whose key names another run under a key of its own, once', async () => {
    const { store, job } = await freshStore();
    const name = job('rekey');
    const taken = await store.importRun(record(name, 9000, 'failed', 'same-key'));
    const clash = record(name, 4000, 'succeeded', 'same-key');
    const id = await store.importRun(clash);
    expect(id).not.toBe(taken);
    expect(await store.importRun(clash)).toBe(id);
    expect(await store.listRuns({ jobs: [name], limit: 10 })).toHaveLength(2);
    expect((await store.jobStatus(name))[0]?.runs_total).toEqual({ failed: 1, succeeded: 1 });
  });

  it('prunes old finished runs in batches, keeping each job\'s latest and its last success', async () => {
    const { store, database, job } = await freshStore();
    const name = job('old');
    const keepSuccess = await store.importRun(record(name, 30 * DAY, 'succeeded'));
    for (let i = 0; i < 1200; i++) await store.importRun(record(name, 20 * DAY + i, 'failed'));
    const recent = await store.importRun(record(name, DAY, 'failed'));
    const running = await admitted(store, newRun(name, { startedAt: new Date(Date.now() - 40 * DAY) }));
    const old = await store.addRequest({ job: name, args: [], notBefore: new Date(), requestedBy: null });
    await mysqlQuery(`UPDATE \`${database}\`.requests SET status = 'cancelled', finished_at = UTC_TIMESTAMP(6) - INTERVAL 20 DAY WHERE id = ?`, [old]);
    const result = await store.prune({ before: new Date(Date.now() - 10 * DAY), keep: 1, deadline: monotonicMs() + 600_000 });
    expect(result).toEqual({ runs: 1200, requests: 1, complete: true });
    const left = (await store.listRuns({ jobs: [name], limit: 100 })).map((r) => r.id).sort((x, y) => x - y);
    expect(left).toEqual([keepSuccess, recent, running].sort((x, y) => x - y));
    expect((await store.jobStatus(name))[0]?.runs_total).toEqual({ failed: 1201, succeeded: 1 });
  });

  it('claims a periodic task once per period, for the whole log', async () => {
    const { store } = await freshStore();
    expect(await store.claimTask('prune', DAY)).toBe(true);
    expect(await store.claimTask('prune', DAY)).toBe(false);
    await store.releaseTask('prune');
    expect(await store.claimTask('prune', DAY)).toBe(true);
    expect(await store.claimTask('prune', 0)).toBe(true);
  });

  it('tells retried failures apart in a job\'s recent runs, and notes a blocked lock', async () => {
    const { store, job } = await freshStore();
    const name = job('retried');
    const first = await admitted(store, newRun(name));
    await store.finishRun(first, outcome({ status: 'failed', exitCode: 1 }), false);
    const retry = await store.startRetry(first, newRun(name, { trigger: 'retry', attempt: 2 }));
    await store.finishRun(retry, outcome(), true);
    await store.recordBlocked(name, 'mallory');
    const [status] = await store.jobStatus(null).then((all) => all.filter((j) => j.job === name));
    expect(status).toMatchObject({
      recent: [{ id: first, status: 'failed', retried: true }, { id: retry, status: 'succeeded', retried: false }],
      success_rate: 1, blocked_by: 'mallory', last_success_run_id: retry, runs_total: { failed: 1, succeeded: 1 },
    });
    expect(await store.listRuns({ jobs: [name], status: 'failed', host: 'host-a', limit: 10 })).toMatchObject([{ id: first }]);
    expect(await store.listRuns({ jobs: [name], beforeId: retry, since: new Date(Date.now() - DAY).toISOString(), limit: 10 })).toMatchObject([{ id: first }]);
  });
});
