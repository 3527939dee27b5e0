import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { mysqlClient, mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';

// A MySQL run sends its statements in a few packets (the issue's "the run recorded in the
// same round trips as the lock where the dialect allows"): GET_LOCK with the admission's
// reads, its writes with COMMIT, the child pid, the outcome with RELEASE_LOCK.

const trips = (stderr: string, job: string): number => {
  const said = new RegExp(`${job}: (\\d+) MySQL round trips after connecting`).exec(stderr);
  if (!said) throw new Error(`no round trips in:\n${stderr}`);
  return Number(said[1]);
};

describe('a MySQL run in few round trips', () => {
  it('a plain run on a current log costs at most 6 round trips, and is recorded as before', async () => {
    const box = mysqlSandbox();
    const job = box.job('trips');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    const second = await cronguard(['-v', '-n', job, '--', 'sh', '-c', 'exit 3'], box.env);
    expect(second.code).toBe(3);
    expect(trips(second.stderr, job)).toBeLessThanOrEqual(6);
    const runs = await mysqlQuery<{ status: string; child_pid: number | null }>(`SELECT status, child_pid FROM \`${box.database}\`.runs ORDER BY id`);
    expect(runs.map((r) => r.status)).toEqual(['succeeded', 'failed']);
    expect(runs.every((r) => r.child_pid !== null)).toBe(true);
    const counts = await mysqlQuery<{ status: string; n: number }>(`SELECT status, n FROM \`${box.database}\`.run_counts WHERE job = ? ORDER BY status`, [job]);
    expect(counts.map((c) => [c.status, Number(c.n)])).toEqual([['failed', 1], ['succeeded', 1]]);
  });

  it('requests are claimed by the run the same packet inserts, with their arguments', async () => {
    const box = mysqlSandbox();
    const job = box.job('claims');
    const out = box.path('args');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    expect((await cronguard(['request', job, '--', 'a b', 'c'], box.env)).code).toBe(0);
    const run = await cronguard(['-v', '-n', job, '--', 'sh', '-c', 'printf "%s\\n" "$@" > "$0"', out], box.env);
    expect(run.code).toBe(0);
    expect(trips(run.stderr, job)).toBeLessThanOrEqual(6);
    expect(lines(out)).toEqual(['a b', 'c']);
    const [request] = await mysqlQuery<{ status: string; run_id: number }>(`SELECT status, run_id FROM \`${box.database}\`.requests`);
    const [last] = await mysqlQuery<{ id: number; trigger: string }>(`SELECT id, \`trigger\` FROM \`${box.database}\`.runs ORDER BY id DESC LIMIT 1`);
    expect(request).toMatchObject({ status: 'succeeded', run_id: last?.id });
    expect(last?.trigger).toBe('request');
  });

  it('a run refused by --min-interval frees the lock in the packet of its COMMIT', async () => {
    const box = mysqlSandbox();
    const job = box.job('early');
    expect((await cronguard(['--min-interval', '1h', '-n', job, '--', 'true'], box.env)).code).toBe(0);
    const early = await cronguard(['-v', '--min-interval', '1h', '-n', job, '--', 'true'], box.env);
    expect(early.code).toBe(0);
    expect(trips(early.stderr, job)).toBeLessThanOrEqual(2);
    expect(await mysqlQuery(`SELECT id FROM \`${box.database}\`.runs`)).toHaveLength(1);
  });

  // The admission's first packet reads the job's row FOR UPDATE right after GET_LOCK: when
  // the name is another session's, it must lock nothing, or a skip would wait on the row.
  it('an invocation finding the lock held locks no row of the job: it skips while the row is locked', async () => {
    const box = mysqlSandbox();
    const job = box.job('held');
    const log = box.path('log');
    const barrier = box.path('barrier');
    const holder = start(['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const client = await mysqlClient();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT name FROM \`${box.database}\`.jobs WHERE name = ? FOR UPDATE`, [job]);
      const skipped = await cronguard(['-v', '-n', job, '--', 'true'], box.env);
      expect(skipped.code).toBe(0);
      expect(skipped.stderr).toMatch(/held by/);
      expect(skipped.stderr).not.toMatch(/Lock wait timeout/);
      await client.query('ROLLBACK');
    } finally {
      await client.end();
    }
    release(barrier);
    expect((await holder.done).code).toBe(0);
    const runs = await mysqlQuery<{ status: string; overlaps: number }>(`SELECT status, overlaps FROM \`${box.database}\`.runs`);
    expect(runs).toEqual([{ status: 'succeeded', overlaps: 1 }]);
  });
});
