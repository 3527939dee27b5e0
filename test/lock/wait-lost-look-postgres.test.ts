import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { fixture, lines, release, spooled, start, waitFor } from '../helpers.js';
import { holdingClient, pgRuns, pgSandbox, sql } from '../pg-helpers.js';

// The waiter's session, cut while a statement of it waits for a table the test holds (not a
// server backend cut before, which may still be on its way out).
async function cutWhileWaiting(job: string, what: string, before: number[] = []): Promise<number> {
  let pid: number | null = null;
  await waitFor(async () => {
    const [row] = await sql<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND NOT (pid = ANY($2::int[]))",
      [`cronguard:${job}`, before],
    );
    pid = row?.pid ?? null;
    return pid !== null;
  }, what);
  await sql('SELECT pg_terminate_backend($1)', [pid]);
  return pid as unknown as number;
}

// A waiter (-w) whose session is lost while its admission is in flight connects again and
// asks whether the server recorded that admission before it settles it. When that question
// is lost too, the answer is not taken as "yes" (an abandoned row for a run that never was):
// it is asked again at the next connection.
describe('-w, PostgreSQL: an admission lost in flight, then the look at it', () => {
  it('records neither: the waiter runs once after the holder; no abandoned row, nothing spooled', async () => {
    const box = pgSandbox();
    const job = box.job('lost-look');
    const [log, barrier, ran] = [box.path('record'), box.path('barrier'), box.path('ran')];
    const holder = start(['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    // While the test holds the run log's table, the waiter's statements wait for it: its
    // admission (the "locked" refusal reads the holder's row), then its look at that admission.
    const blocker: pg.Client = await holdingClient();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`LOCK TABLE "${box.schema}".runs IN ACCESS EXCLUSIVE MODE`);
      const waiter = start(['-w', '120s', '-n', job, '--', 'sh', '-c', `echo ran >> ${ran}`], box.env);
      const first = await cutWhileWaiting(job, 'the waiter’s admission to wait for the table');
      await cutWhileWaiting(job, 'the waiter’s look at its lost admission to wait for the table', [first]);
      // Connected again, it finds no row of the lost admission, and waits for the lock as before.
      await blocker.query('ROLLBACK');
      release(barrier);
      expect((await holder.done).code).toBe(0);
      const result = await waiter.done;
      expect(result.code).toBe(0);
      expect(lines(ran)).toEqual(['ran']);
    } finally {
      await blocker.end();
    }
    expect(spooled(box.stateDir)).toEqual([]);
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  }, 120_000);
});
