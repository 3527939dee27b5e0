import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { cronguard, runs, sandbox, start, waitFor } from '../helpers.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

// Another writer holds the embedded log (stopped or stalled mid-write): a run waits for it
// without stopping its own process, whose lockfile lease goes on being refreshed meanwhile.
describe('the embedded log locked by another writer', () => {
  it('is waited for with the wrapper still alive: its lease refreshed, nothing run until the log is free, then run and recorded once, as started then', async () => {
    const box = sandbox();
    expect((await cronguard(['-l', 'lockfile', '-n', 'wait', '--', 'true'], box.env)).code).toBe(0);
    const db = new Database(join(box.stateDir, 'cronguard.db'));
    db.prepare('BEGIN IMMEDIATE').run();
    const container = join(box.lockDir, 'wait.lockdir');
    let released = false;
    try {
      const holder = start(['-l', 'lockfile', '-n', 'wait', '--', 'touch', box.path('ran')], box.env);
      const mine = () => readdirSync(container).find((name) => readFileSync(join(container, name), 'utf8').endsWith(` ${holder.child.pid}\n`));
      await waitFor(() => mine() !== undefined, 'the holder to take the lease');
      const lease = join(container, mine() as string);
      const taken = lstatSync(lease).mtimeMs;
      // Its admission waits for the log; its lease is refreshed all the same, once a second.
      await waitFor(() => lstatSync(lease).mtimeMs > taken, 'the lease to be refreshed while the log is locked');
      expect(existsSync(box.path('ran'))).toBe(false);
      const freedAt = Date.now();
      db.prepare('ROLLBACK').run();
      released = true;
      const result = await holder.done;
      expect(result).toMatchObject({ code: 0, stderr: '' });
      expect(existsSync(box.path('ran'))).toBe(true);
      expect(runs(box.stateDir).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
      // It started once it had the log, not when it began to wait for it (issue 35, item 10).
      expect(Date.parse(runs(box.stateDir)[1]?.started_at as string)).toBeGreaterThanOrEqual(freedAt);
    } finally {
      if (!released) db.prepare('ROLLBACK').run();
      db.close();
    }
  });
});

// A prune deletes in batches, each committed: one that finds the log busy is tried again on
// its own, and what the earlier batches deleted is still counted, once.
describe('a prune that finds the log busy between its batches', () => {
  it('waits, goes on, and counts every run it deleted', async () => {
    const box = sandbox();
    expect((await cronguard(['-n', 'seed', '--', 'true'], box.env)).code).toBe(0);
    const other = new Database(join(box.stateDir, 'cronguard.db'));
    other
      .prepare(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500)
         INSERT INTO runs (job, status, trigger, attempt, host, pid, command, started_at, finished_at, run_key)
         SELECT 'old', 'failed', 'cron', 1, 'h', 1, 'c', '2020-01-01T00:00:00.000Z', '2020-01-01T00:00:01.000Z', 'old-' || i FROM n`,
      )
      .run();
    const store = await SqliteStore.open(box.stateDir);
    // The second batch finds another writer holding the file, for longer than SQLite's own
    // wait; the writer lets go a little later.
    const db = (store as unknown as { db: BetterSqlite3.Database }).db;
    const prepare = db.prepare.bind(db);
    let batches = 0;
    db.prepare = ((sql: string) => {
      const statement = prepare(sql);
      if (!sql.startsWith('DELETE FROM runs')) return statement;
      const all = statement.all.bind(statement);
      statement.all = ((...args: unknown[]) => {
        if (++batches === 2) {
          other.prepare('BEGIN IMMEDIATE').run();
          setTimeout(() => other.prepare('COMMIT').run(), 300);
        }
        return all(...(args as []));
      }) as typeof statement.all;
      return statement;
    }) as typeof db.prepare;
    try {
      const result = await store.prune({ before: new Date('2021-01-01T00:00:00Z'), keep: 0, deadline: Number.POSITIVE_INFINITY });
      expect(batches).toBeGreaterThan(3);
      expect(result).toMatchObject({ runs: 2500, complete: true });
      expect(runs(box.stateDir).map((r) => r.job)).toEqual(['seed']);
    } finally {
      await store.close();
      other.close();
    }
  });
});
