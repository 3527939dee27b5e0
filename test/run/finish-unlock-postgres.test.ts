import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, startMany } from '../helpers.js';
import { pgRuns, pgSandbox } from '../pg-helpers.js';

// With the postgres lock and log on one session, the run's outcome and the unlock are one
// statement: the lock is free the moment the row says the run ended, never before.
describe('the outcome and the unlock in one round trip', () => {
  it('a plain run after the first costs three round trips: admission, child pid, outcome with unlock', async () => {
    const box = pgSandbox();
    const job = box.job('trips');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    const second = await cronguard(['-v', '-n', job, '--', 'true'], box.env);
    expect(second.code).toBe(0);
    expect(second.stderr).toContain(`${job}: 3 PostgreSQL round trips after connecting`);
  });

  it('instances started back to back never overlap, and the next one never finds the last one running', async () => {
    const box = pgSandbox();
    const job = box.job('relay');
    const log = box.path('record.log');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    for (let round = 0; round < 4; round++) {
      const results = await startMany(6, ['-w', '5m', '-n', job, '--', fixture('record.sh'), log], box.env).done;
      expect(results.map((r) => r.code)).toEqual(Array(6).fill(0));
    }
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(48);
    for (let i = 0; i < lines.length; i += 2) {
      const pid = lines[i]?.split(' ')[1];
      expect([lines[i], lines[i + 1]]).toEqual([`start ${pid}`, `end ${pid}`]);
    }
    const rows = await pgRuns(box.schema);
    expect(rows).toHaveLength(24);
    expect(rows.every((r) => r.status === 'succeeded' && r.exit_code === 0)).toBe(true);
  });
});
