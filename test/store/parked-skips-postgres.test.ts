import { describe, expect, it } from 'vitest';
import { cronguard, waitFor } from '../helpers.js';
import { holdingClient, pgSandbox, sql } from '../pg-helpers.js';

// A skip that finds no running row parks itself on the job (count_skip), and the run's
// outcome folds what is parked into its row. A skip parked while that outcome waits for the
// job's row must be neither lost nor counted twice: the six-host race once lost one.
describe('skips parked on a job while its run finishes', () => {
  it('are all counted: on the run, or still parked for the next', async () => {
    const box = pgSandbox();
    const job = box.job('parked');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    const [run] = await sql<{ id: string }>(`SELECT id FROM "${box.schema}".runs`);
    await sql(`UPDATE "${box.schema}".runs SET status = 'running', "overlaps" = 0`);
    await sql(`INSERT INTO "${box.schema}".jobs (name, pending_overlaps) VALUES ($1, 1)
               ON CONFLICT (name) DO UPDATE SET pending_overlaps = 1`, [job]);
    // A second skip, parking itself: its row lock is held until the test commits it.
    const skip = await holdingClient();
    const finisher = await holdingClient();
    try {
      await skip.query('BEGIN');
      await skip.query(`SELECT "${box.schema}".count_skip($1, NULL)`, [job]);
      const outcome = { id: run?.id, status: 'succeeded', finished_at: new Date().toISOString(), duration_ms: 1, exit_code: 0,
        output: '', output_truncated: false, final: true, schema: box.schema, request_status: 'succeeded' };
      const finished = finisher.query(`SELECT "${box.schema}".finish($1::jsonb) AS found`, [JSON.stringify(outcome)]);
      await waitFor(async () => (await sql(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%finish(%'`)).length > 0,
        'the outcome to wait for the parked skip');
      await skip.query('COMMIT');
      expect((await finished).rows[0]?.found).toBe(true);
    } finally {
      await skip.end();
      await finisher.end();
    }
    const [row] = await sql<{ overlaps: number }>(`SELECT "overlaps" FROM "${box.schema}".runs`);
    const [parked] = await sql<{ n: number }>(`SELECT pending_overlaps AS n FROM "${box.schema}".jobs WHERE name = $1`, [job]);
    expect((row?.overlaps ?? 0) + (parked?.n ?? 0)).toBe(2);
  });
});
