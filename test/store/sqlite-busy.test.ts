import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { cronguard, runs, sandbox, start, waitFor } from '../helpers.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

// Another writer holds the embedded log (stopped or stalled mid-write): a run waits for it
// without stopping its own process, whose lockfile lease goes on being refreshed meanwhile.
describe('the embedded log locked by another writer', () => {
  it('is waited for with the wrapper still alive: its lease refreshed, nothing run until the log is free, then run and recorded once', async () => {
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
      db.prepare('ROLLBACK').run();
      released = true;
      const result = await holder.done;
      expect(result).toMatchObject({ code: 0, stderr: '' });
      expect(existsSync(box.path('ran'))).toBe(true);
      expect(runs(box.stateDir).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
    } finally {
      if (!released) db.prepare('ROLLBACK').run();
      db.close();
    }
  });
});
