import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { connectPostgres, openPostgresStore, openSqliteStore } from '../../src/store/index.js';
import { resolveDb } from '../../src/store/postgres/config.js';
import type { RunStore } from '../../src/store/run-store.js';
import type { SpooledRun } from '../../src/store/spool-record.js';
import type { NewRun } from '../../src/store/types.js';
import { runs, sandbox } from '../helpers.js';
import { databaseUrl, pgRuns, pgSandbox, sql } from '../pg-helpers.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

// After a failover, the next run that takes the lock marks the lost run's replicated row
// `abandoned`; the run's true outcome, delivered later from its spool, must win, on the
// same row. The reverse never happens: a record with no outcome does not undo a real one.
const RULES = { oneRunPerTick: false, isGone: () => false, minIntervalMs: null, spacingMs: null, onRequest: false, batch: false, batchMax: null, manual: false, keepLock: false, scheduled: null };

interface Opened {
  store: RunStore;
  rows(): Promise<{ id: number | string; status: string; exit_code: number | null; error: string | null }[]>;
  abandon(id: number): Promise<void>;
}

async function open(kind: 'sqlite' | 'postgres'): Promise<Opened> {
  if (kind === 'sqlite') {
    const box = sandbox();
    const store = await openSqliteStore(box.stateDir);
    return {
      store,
      rows: async () => runs(box.stateDir),
      // As another run's admission under the lock would, beside the store's own connection.
      abandon: async (id) => {
        const other = new Database(join(box.stateDir, 'cronguard.db'));
        try {
          other.prepare(`UPDATE runs SET status = 'abandoned', finished_at = ?, error = 'wrapper vanished' WHERE id = ?`).run(new Date().toISOString(), id);
        } finally {
          other.close();
        }
      },
    };
  }
  const box = pgSandbox();
  const db = resolveDb({ value: databaseUrl(), from: 'test' }, { value: box.schema, from: 'test' }, {}) as NonNullable<ReturnType<typeof resolveDb>>;
  const store = await openPostgresStore(await connectPostgres(db, 'test'), box.schema);
  return {
    store,
    rows: () => pgRuns(box.schema) as never,
    abandon: async (id) => {
      await sql(`UPDATE "${box.schema}".runs SET status = 'abandoned', finished_at = now(), error = 'wrapper vanished' WHERE id = $1`, [id]);
    },
  };
}

function spooledRecord(run: NewRun, outcome: SpooledRun['outcome']): SpooledRun {
  return { id: null, run: { ...run, startedAt: run.startedAt.toISOString(), invokedAt: run.invokedAt.toISOString(), tick: null }, childPid: 9, outcome, served: [], final: true };
}

describe.each(['sqlite', 'postgres'] as const)('a late outcome (%s)', (kind) => {
  it('replaces the abandoned verdict on the same row, once; a record without one does not undo it', async () => {
    const { store, rows, abandon } = await open(kind);
    const now = new Date();
    const run: NewRun = {
      job: `late-${randomBytes(4).toString('hex')}`, trigger: 'cron', attempt: 1, host: 'old-primary-host', pid: 4242, username: 'u', command: 'true',
      startedAt: now, invokedAt: now, tick: null, lockBackend: 'postgres', lockKey: '1', slot: 0, maxRunning: 1, runKey: `late-${randomBytes(8).toString('hex')}`, wrapperStart: null,
    };
    const admitted = await store.admit(run, RULES);
    expect(admitted.admitted).toBe(true);
    const id = admitted.admitted ? admitted.runId : -1;
    await abandon(id);
    const outcome = { status: 'succeeded', finishedAt: new Date().toISOString(), durationMs: 5, exitCode: 0, signal: null, output: 'done', outputTruncated: false, error: null } as const;
    expect(await store.importRun(spooledRecord(run, outcome))).toBe(id);
    // An older record of the same run, from before its end, delivered after.
    expect(await store.importRun(spooledRecord(run, null))).toBe(id);
    await store.close();
    expect(await rows()).toEqual([expect.objectContaining({ status: 'succeeded', exit_code: 0, error: null })]);
    expect(String((await rows())[0]?.id)).toBe(String(id));
  });
});
