import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/store/database-config.js';
import { dialectOf } from '../../src/store/dialects.js';
import { connectPostgres, openPostgresStore, openSqliteStore, type RunStore } from '../../src/store/index.js';
import { resolveDb } from '../../src/store/postgres/config.js';
import type { SpooledRun } from '../../src/store/spool-record.js';
import { BINARY, spooled } from '../helpers.js';
import { mysqlUrl } from '../mysql-helpers.js';
import { databaseUrl, pgRuns, pgSandbox } from '../pg-helpers.js';
import { STORES, type StoreKind, storeBox } from '../stores.js';

async function openStore(kind: StoreKind, box: ReturnType<typeof storeBox>): Promise<RunStore> {
  if (kind === 'sqlite') return openSqliteStore(box.stateDir);
  const schema = box.env.CRONGUARD_SCHEMA as string;
  if (kind === 'mysql') {
    const db = resolveDatabase({ value: mysqlUrl(), from: 'test' }, { value: schema, from: 'test' }, {});
    const found = db as NonNullable<typeof db>;
    return dialectOf(found).open(found, 'test', true);
  }
  const db = resolveDb({ value: databaseUrl(), from: 'test' }, { value: schema, from: 'test' }, {}) as NonNullable<ReturnType<typeof resolveDb>>;
  return openPostgresStore(await connectPostgres(db, 'test'), schema);
}

// A finished run as the spool holds it. Keys made before they had a random part were the
// wrapper's boot id, start time, pid and a counter: equal in two PID namespaces of one host.
function record(job: string, startedAt: string, output: string): SpooledRun {
  return {
    id: null,
    run: {
      job, trigger: 'cron', attempt: 1, host: 'vm', pid: 1, username: 'u', command: 'true', startedAt, invokedAt: startedAt,
      tick: null, lockBackend: 'none', lockKey: null, slot: 0, maxRunning: 1, runKey: 'boot/4200/1/1', wrapperStart: 'boot/4200',
    },
    childPid: 2,
    outcome: { status: 'succeeded', finishedAt: startedAt, durationMs: 1, exitCode: 0, signal: null, output, outputTruncated: false, error: null },
  };
}

describe.each(STORES)('run keys (%s)', (kind) => {
  it("a record whose key names another run's row leaves that row alone and gets one of its own, once", async () => {
    const box = storeBox(kind);
    const store = await openStore(kind, box);
    const job = box.job('keys');
    const first = await store.importRun(record(job, '2026-03-01T03:00:00.010Z', 'first container'));
    const second = record(job, '2026-03-01T03:00:00.020Z', 'second container');
    const id = await store.importRun(second);
    // Delivered again (its deliverer died before removing it): the same row.
    expect(await store.importRun(second)).toBe(id);
    await store.close();
    expect(id).not.toBe(first);
    expect((await box.runs()).map((r) => [r.id, r.output, r.run_key])).toEqual([
      [first, 'first container', 'boot/4200/1/1'],
      [id, 'second container', 'boot/4200/1/1@vm/1/2026-03-01T03:00:00.020Z'],
    ]);
  });

  it('a stale record of a run whose end is logged changes nothing, delivered after the end', async () => {
    const box = storeBox(kind);
    const store = await openStore(kind, box);
    const end = record(box.job('stale'), '2026-03-01T03:00:00.010Z', 'the end');
    const id = await store.importRun(end);
    // Its start, delivered late: its wrapper is gone, so it would say `abandoned`.
    expect(await store.importRun({ ...end, childPid: null, outcome: null })).toBe(id);
    await store.close();
    expect((await box.runs()).map((r) => [r.status, r.output])).toEqual([['succeeded', 'the end']]);
  });
});

describe('run keys in PID namespaces', () => {
  it('never collide: wrappers with one boot id, equal pids and start times each get their row', async () => {
    const box = pgSandbox();
    const job = box.job('ns');
    const unshare = process.geteuid?.() === 0 ? ['unshare', '-pf', '--mount-proc'] : ['unshare', '-r', '-pf', '--mount-proc'];
    const wrapper = [...unshare, process.execPath, BINARY, '-l', 'none', '-n', job, '--', 'true'];
    // Each wrapper is pid 1 of its namespace; a pair forked by one shell often starts in one
    // clock tick, as containers of one host do.
    for (let round = 0; round < 10; round++) {
      const stderr = box.path(`stderr-${round}`);
      await new Promise((resolve) =>
        spawn('sh', ['-c', 'for i in 1 2; do "$@" 2>>"$0" & done; wait', stderr, ...wrapper], { env: box.env, stdio: 'ignore' }).on('exit', resolve),
      );
      expect(readFileSync(stderr, 'utf8')).toBe('');
    }
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => [r.pid, r.status])).toEqual(Array.from({ length: 20 }, () => [1, 'succeeded']));
    expect(new Set(rows.map((r) => r.run_key)).size).toBe(20);
    expect(spooled(box.stateDir)).toEqual([]);
  });
});
