import { chmodSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { NewRun, RunningRow } from '../../src/store/types.js';
import { asNobody, cronguard, runs, sandbox, start } from '../helpers.js';


let keys = 0;
// The admission rules of a plain run.
const RULES = { oneRunPerTick: true, minIntervalMs: null, spacingMs: null, onRequest: false, batch: false, batchMax: null, manual: false, keepLock: false, scheduled: null };
const newRun = (over: Partial<NewRun> = {}): NewRun => ({
  job: 'j',
  trigger: 'cron',
  attempt: 1,
  host: 'h',
  pid: 111,
  username: 'u',
  command: 'true',
  startedAt: new Date('2026-01-01T00:00:00Z'),
  invokedAt: new Date('2026-01-01T00:00:00Z'),
  tick: null,
  lockBackend: 'flock',
  lockKey: '/l/j.lock',
  slot: 0,
  maxRunning: 1,
  runKey: `key-${++keys}`,
  wrapperStart: null,
  ...over,
});
const admit = async (store: SqliteStore, run: NewRun, isGone: (row: RunningRow) => boolean = () => false): Promise<number> => {
  const admission = await store.admit(run, { ...RULES, isGone });
  if (!admission.admitted) throw new Error(`not admitted: ${admission.reason}`);
  return admission.runId;
};

describe('SqliteStore', () => {
  it('creates the schema by migration, in a private 0600 file', async () => {
    const box = sandbox();
    const store = await SqliteStore.open(box.stateDir);
    expect(await store.migrate()).toBe(SQLITE_MIGRATIONS.length);
    await admit(store, newRun());
    await store.close();
    expect(statSync(join(box.stateDir, 'cronguard.db')).mode & 0o777).toBe(0o600);
    expect(statSync(box.stateDir).mode & 0o777).toBe(0o700);
  });

  it('marks running rows of dead wrappers on this host abandoned, and only those', async () => {
    const box = sandbox();
    const store = await SqliteStore.open(box.stateDir);
    const dead = await admit(store, newRun({ pid: 1001 }));
    const alive = await admit(store, newRun({ pid: 1002 }));
    const otherHost = await admit(store, newRun({ pid: 1003, host: 'elsewhere' }));
    const otherJob = await admit(store, newRun({ pid: 1004, job: 'k' }));
    await admit(store, newRun({ pid: 1005 }), (row) => row.pid === 1001);
    const status = async (id: number) => (await store.getRun(id))?.status;
    expect(await status(dead)).toBe('abandoned');
    expect(await status(alive)).toBe('running');
    expect(await status(otherHost)).toBe('running');
    expect(await status(otherJob)).toBe('running');
    await store.close();
  });

  it('counts overlaps on the running row, or keeps them for the run about to insert it', async () => {
    const box = sandbox();
    const store = await SqliteStore.open(box.stateDir);
    await store.recordOverlap('j', 'h', null);
    await store.recordOverlap('j', 'h', null);
    const id = await admit(store, newRun());
    expect((await store.getRun(id))?.overlaps).toBe(2);
    await store.recordOverlap('j', 'h', null);
    expect((await store.getRun(id))?.overlaps).toBe(3);
    await store.finishRun(id, {
      status: 'succeeded',
      finishedAt: new Date(),
      durationMs: 5,
      exitCode: 0,
      signal: null,
      output: 'x',
      outputTruncated: false,
      error: null,
    }, true);
    // Leftovers of that run still hold the lock: a skip found by their wrapper's pid.
    await store.recordOverlap('j', 'h', 111);
    expect((await store.getRun(id))?.overlaps).toBe(4);
    const next = await admit(store, newRun({ pid: 222 }));
    expect((await store.getRun(next))?.overlaps).toBe(0);
    await store.close();
  });

  it('writes a record delivered twice, or after its start got through, as one row', async () => {
    const box = sandbox();
    const store = await SqliteStore.open(box.stateDir);
    const run = newRun();
    const started = await admit(store, run);
    const record = {
      id: null,
      run: { ...run, startedAt: run.startedAt.toISOString(), invokedAt: run.invokedAt.toISOString(), tick: null },
      childPid: 5,
      outcome: { status: 'failed', finishedAt: new Date().toISOString(), durationMs: 7, exitCode: 2, signal: null, output: 'o', outputTruncated: false, error: null },
    } as const;
    expect(await store.importRun(record)).toBe(started);
    expect(await store.importRun(record)).toBe(started);
    expect(await store.listRuns({ limit: 10 })).toEqual([expect.objectContaining({ id: started, status: 'failed', exit_code: 2, child_pid: 5 })]);
    await store.close();
  });

  it('lists runs newest first with job, status and limit filters', async () => {
    const box = sandbox();
    const store = await SqliteStore.open(box.stateDir);
    for (const job of ['a', 'b', 'a', 'a']) await admit(store, newRun({ job }));
    expect((await store.listRuns({ limit: 10 })).map((r) => r.id)).toEqual([4, 3, 2, 1]);
    expect((await store.listRuns({ jobs: ['a'], limit: 2 })).map((r) => r.id)).toEqual([4, 3]);
    expect(await store.listRuns({ status: 'failed', limit: 10 })).toEqual([]);
    expect((await store.latestRun('b'))?.id).toBe(2);
    await store.close();
  });
});

describe('a run log that cannot be written', () => {
  it('still runs the job, warns once, and exits with the command code (state dir is a file)', async () => {
    const box = sandbox();
    writeFileSync(box.stateDir, '');
    const result = await cronguard(['-n', 'j', '--', 'sh', '-c', 'echo ran; exit 4'], box.env);
    expect(result.code).toBe(4);
    expect(result.stdout).toBe('ran\n');
    expect(result.stderr).toMatch(/^cronguard: run log in .* unavailable \(.*\); the job runs unrecorded\ncronguard: j: failed with exit 4 after [0-9.]+m?s\n$/);
  });

  it('still runs the job when the state dir is not writable', async () => {
    const box = sandbox();
    chmodSync(box.dir, 0o755);
    mkdirSync(box.stateDir, { mode: 0o555 });
    chmodSync(box.stateDir, 0o555);
    const env = { ...box.env, CRONGUARD_LOCK_DIR: box.path('locks-nobody') };
    mkdirSync(env.CRONGUARD_LOCK_DIR as string, { mode: 0o777 });
    chmodSync(env.CRONGUARD_LOCK_DIR as string, 0o777);
    const result = await start(['-n', 'j', '--', 'echo', 'ran'], env, asNobody).done;
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('ran\n');
    expect(result.stderr).toMatch(/run log in .* unavailable/);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('a corrupt database file does not stop the job', async () => {
    const box = sandbox();
    mkdirSync(box.stateDir);
    writeFileSync(join(box.stateDir, 'cronguard.db'), 'this is not a database'.repeat(100));
    const result = await cronguard(['-n', 'j', '--', 'true'], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/run log in .* unavailable/);
  });

  it('many invocations migrating a new database at once all succeed', async () => {
    const box = sandbox();
    const all = await Promise.all(Array.from({ length: 12 }, (_, i) => cronguard(['-n', `m${i}`, '--', 'true'], box.env)));
    for (const result of all) expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(runs(box.stateDir)).toHaveLength(12);
  });
});
