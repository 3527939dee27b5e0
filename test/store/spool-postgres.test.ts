import { readdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { connectPostgres, openPostgresStore } from '../../src/store/index.js';
import { resolveDb } from '../../src/store/postgres/config.js';
import type { NewRun } from '../../src/store/types.js';
import { cronguard, spooled } from '../helpers.js';
import { databaseUrl, pgRuns, pgSandbox, proxy } from '../pg-helpers.js';

// A database reached through a proxy the test can stop: the same URL, up or down.
async function outage(schema: string) {
  const server = await proxy();
  return { server, env: { CRONGUARD_DATABASE_URL: server.url, CRONGUARD_SCHEMA: schema } };
}

describe('the spool', () => {
  it('delivers a record only into the database and schema it was spooled for', async () => {
    const a = pgSandbox();
    const b = pgSandbox();
    const { server, env } = await outage(a.schema);
    await server.stop();
    const job = a.job('misfiled');
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'for a'], { ...a.env, ...env })).code).toBe(0);
    expect(spooled(a.stateDir)).toHaveLength(1);
    // Another schema, same state dir: its run must not take a's record.
    await server.start();
    const inB = await cronguard(['-l', 'flock', '-n', job, '--', 'true'], { ...a.env, CRONGUARD_SCHEMA: b.schema });
    expect(inB).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(b.schema)).map((r) => r.output)).toEqual(['']);
    expect(spooled(a.stateDir)).toHaveLength(1);
    // a's next run delivers it.
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'true'], { ...a.env, ...env })).code).toBe(0);
    await server.close();
    expect((await pgRuns(a.schema)).map((r) => r.output).sort()).toEqual(['', 'for a\n']);
    expect(spooled(a.stateDir)).toEqual([]);
  });

  it('takes back a record whose deliverer died after claiming it', async () => {
    const box = pgSandbox();
    const { server, env } = await outage(box.schema);
    await server.stop();
    const job = box.job('reclaimed');
    await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'orphaned'], { ...box.env, ...env });
    // As a deliverer killed between its claim and its INSERT leaves it.
    const dir = join(box.stateDir, 'spool', readdirSync(join(box.stateDir, 'spool'))[0] as string);
    const [file] = readdirSync(dir);
    renameSync(join(dir, file as string), join(dir, `${file}.delivering-999999-0000_1`));
    expect(spooled(box.stateDir)).toEqual([]);
    await server.start();
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'true'], { ...box.env, ...env })).code).toBe(0);
    await server.close();
    expect((await pgRuns(box.schema)).map((r) => r.output).sort()).toEqual(['', 'orphaned\n']);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('stays one row when a start whose reply was lost did commit, and its record is delivered (twice)', async () => {
    const box = pgSandbox();
    const db = resolveDb({ value: databaseUrl(), from: 'test' }, { value: box.schema, from: 'test' }, {}) as NonNullable<ReturnType<typeof resolveDb>>;
    const store = await openPostgresStore(await connectPostgres(db, 'test'), box.schema);
    const now = new Date();
    const run: NewRun = {
      job: box.job('ghost'), trigger: 'cron', attempt: 1, host: 'h', pid: 1, username: 'u', command: 'true',
      startedAt: now, invokedAt: now, tick: null, lockBackend: 'none', lockKey: null, slot: 0, maxRunning: 1, runKey: `ghost-${box.schema}`, wrapperStart: null,
    };
    const admitted = await store.admit(run, { oneRunPerTick: false, isGone: () => false, minIntervalMs: null, spacingMs: null, onRequest: false, batch: false, batchMax: null, manual: false, keepLock: false, scheduled: null });
    expect(admitted.admitted).toBe(true);
    const record = {
      id: null,
      run: { ...run, startedAt: now.toISOString(), invokedAt: now.toISOString(), tick: null },
      childPid: 7,
      outcome: { status: 'succeeded', finishedAt: new Date().toISOString(), durationMs: 3, exitCode: 0, signal: null, output: 'x', outputTruncated: false, error: null },
    } as const;
    await store.importRun(record);
    await store.importRun(record);
    await store.close();
    expect(await pgRuns(box.schema)).toEqual([expect.objectContaining({ status: 'succeeded', child_pid: 7, output: 'x' })]);
  });
});
