import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, spooled, start, waitFor } from '../helpers.js';
import { holdingClient, pgRuns, pgSandbox, proxy, sql } from '../pg-helpers.js';

// The backend of one of the job's sessions whose statement waits for a table the test holds
// (not one found before, which may still be on its way out).
async function waitingBackend(job: string, what: string, before: number[] = []): Promise<number> {
  let pid: number | null = null;
  await waitFor(async () => {
    const [row] = await sql<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND NOT (pid = ANY($2::int[]))",
      [`cronguard:${job}`, before],
    );
    pid = row?.pid ?? null;
    return pid !== null;
  }, what);
  return pid as unknown as number;
}

// The test holds the run log's table: the statements of the job wait for it.
async function holdingRuns(schema: string): Promise<pg.Client> {
  const blocker = await holdingClient();
  await blocker.query('BEGIN');
  await blocker.query(`LOCK TABLE "${schema}".runs IN ACCESS EXCLUSIVE MODE`);
  return blocker;
}

describe('PostgreSQL: an admission whose answer never came', () => {
  // A waiter (-w) whose connection is cut while its admission is in flight connects again and
  // asks whether the server recorded that admission before it settles it. When that question
  // is cut off too, the answer is not taken as "yes" (an abandoned row for a run that never
  // was): it is asked again at the next connection.
  it('-w, cut twice (the admission, then the look at it): neither recorded; the waiter runs once after the holder', async () => {
    const box = pgSandbox();
    const job = box.job('lost-look');
    const [log, barrier, ran] = [box.path('record'), box.path('barrier'), box.path('ran')];
    const holder = start(['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    // The waiter reaches the server through a proxy that cuts its connection (no answer, as
    // with a network cut), which the server's backend, waiting for the table, notices later.
    const cut = await proxy();
    const blocker = await holdingRuns(box.schema);
    try {
      const waiter = start(['-w', '120s', '-n', job, '--', 'sh', '-c', `echo ran >> ${ran}`], { ...box.env, CRONGUARD_DATABASE_URL: cut.url });
      const first = await waitingBackend(job, 'the waiter’s admission to wait for the table');
      await cut.stop();
      await cut.start();
      await waitingBackend(job, 'the waiter’s look at its lost admission to wait for the table', [first]);
      await cut.stop();
      await cut.start();
      // Connected again, it finds no row of the lost admission, and waits for the lock as before.
      await blocker.query('ROLLBACK');
      release(barrier);
      expect((await holder.done).code).toBe(0);
      const result = await waiter.done;
      expect(result.code).toBe(0);
      expect(lines(ran)).toEqual(['ran']);
    } finally {
      await blocker.end();
      await cut.close();
    }
    expect(spooled(box.stateDir)).toEqual([]);
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  }, 120_000);

  // The server answered the admission with an error that ended the session (a backend
  // terminated; a pooler whose server is down says FATAL too): the statement did not commit,
  // so nothing is left to settle, and no record of a run that never was is spooled.
  it('a FATAL answer (the backend terminated mid-admission): 69, one line; nothing spooled, no row', async () => {
    const box = pgSandbox();
    const job = box.job('fatal');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    const blocker = await holdingRuns(box.schema);
    let result: Awaited<ReturnType<typeof cronguard>>;
    try {
      const ended = cronguard(['-n', job, '--', 'true'], box.env);
      await sql('SELECT pg_terminate_backend($1)', [await waitingBackend(job, 'the admission to wait for the table')]);
      result = await ended;
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/^cronguard: PostgreSQL at [^\n]*: terminating connection due to administrator command\n$/);
    expect(spooled(box.stateDir)).toEqual([]);
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  }, 120_000);
});
