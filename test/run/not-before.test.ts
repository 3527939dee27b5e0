import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { cronguard, lines, sandbox } from '../helpers.js';

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

// A web application writing to the SQLite log with SQLite's own time functions: a request
// for later waits until then, whichever format its not_before has.
describe('a request inserted with datetime()', () => {
  it('waits until its not_before, as one written in ISO form does, and shows it as a UTC time', async () => {
    const box = sandbox();
    await cronguard(['migrate'], box.env);
    const db = new Database(join(box.stateDir, 'cronguard.db'));
    try {
      db.prepare("INSERT INTO requests (job, args, not_before) VALUES ('j', '[\"later\"]', datetime('now', '+1 hour'))").run();
      db.prepare("INSERT INTO requests (job, args, not_before) VALUES ('j', '[\"now\"]', datetime('now', '-1 minute'))").run();
    } finally {
      db.close();
    }
    const log = box.path('log');
    for (let i = 0; i < 3; i++) await cronguard(['-n', 'j', '--on-request', '--', 'sh', '-c', `echo "$1" >> ${log}`, 'sh'], box.env);
    expect(lines(log)).toEqual(['now']);
    const requests = JSON.parse((await cronguard(['requests', '--json'], box.env)).stdout) as { args: string[]; status: string; not_before: string }[];
    const later = requests.find((r) => r.args[0] === 'later');
    expect(later?.status).toBe('pending');
    expect(later?.not_before).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(Date.parse(later?.not_before as string)).toBeGreaterThan(Date.now() + 50 * 60_000);
  });
});
