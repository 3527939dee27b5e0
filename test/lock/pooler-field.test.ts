import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { advisoryKey } from '../../src/store/postgres/lock.js';
import { cronguard, type Finished, fixture, isAlive, lines, release, type Started, start, startMany, waitFor } from '../helpers.js';
import { holdingClient, pgRuns, pgSandbox, sql } from '../pg-helpers.js';
import { hasPgbouncer, PGBOUNCER, type Pgbouncer, startPgbouncer } from '../pgbouncer.js';

// Field tests behind Debian's PgBouncer (issue 18): a default PgBouncer just works, in both
// pool modes; under transaction pooling the postgres lock never lets two copies run (it
// refuses with one line naming the pooling, or skips) and leaves no lock behind; behind a
// session pool a killed server backend fences the job; the run log's lock_timeout holds
// through a transaction pool.
const poolers: Record<string, Pgbouncer> = {};

// The server backends holding a job's advisory lock, asked of the server itself.
async function holders(job: string, schema: string): Promise<number[]> {
  const key = advisoryKey(job, schema).toString();
  const rows = await sql<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
       AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid`,
    [key],
  );
  return rows.map((r) => r.pid);
}

// Waits for a held command to start; a wrapper that ended first fails the test with what it said.
async function started(run: Started, log: string): Promise<void> {
  let ended: Finished | null = null;
  void run.done.then((r) => {
    ended = r;
  });
  await waitFor(() => {
    if (ended) throw new Error(`cronguard ended (${ended.code}) before its command started: ${ended.stderr}`);
    return lines(log).length > 0;
  }, 'the command to start');
}

function through(box: ReturnType<typeof pgSandbox>, pooler: Pgbouncer): NodeJS.ProcessEnv {
  return { ...box.env, CRONGUARD_DATABASE_URL: pooler.url };
}

const title = hasPgbouncer ? 'behind PgBouncer' : `behind PgBouncer: skipped, ${PGBOUNCER} is missing (Debian package pgbouncer; .ci/run installs it)`;
describe.skipIf(!hasPgbouncer)(title, () => {
  beforeAll(async () => {
    poolers.session = await startPgbouncer({ poolMode: 'session' });
    poolers.transaction = await startPgbouncer({ poolMode: 'transaction' });
    // As production sites commonly set it, so that clients' startup options pass: they are
    // dropped, silently.
    poolers.usual = await startPgbouncer({ poolMode: 'transaction', ignoreStartupParameters: 'extra_float_digits,options' });
    expect(new Set(Object.values(poolers).map((p) => p.url)).size).toBe(3);
  });
  afterAll(async () => {
    await Promise.all(Object.values(poolers).map((p) => p.stop()));
  });

  for (const mode of ['session', 'transaction'] as const) {
    it(`a default PgBouncer (${mode} pooling) runs the job and records it`, async () => {
      const box = pgSandbox();
      const job = box.job(`default-${mode}`);
      const env = through(box, poolers[mode] as Pgbouncer);
      for (let i = 0; i < 2; i++) {
        const result = await cronguard(['-n', job, '--', 'sh', '-c', 'echo ran'], env);
        expect(result.stderr).toBe('');
        expect(result).toMatchObject({ code: 0, stdout: 'ran\n' });
      }
      const rows = await pgRuns(box.schema);
      expect(rows.map((r) => [r.status, r.exit_code, r.output])).toEqual([
        ['succeeded', 0, 'ran\n'],
        ['succeeded', 0, 'ran\n'],
      ]);
      expect(await holders(job, box.schema)).toEqual([]);
    });
  }

  it('transaction pooling: a second copy is refused with one line naming the pooling, or skips; never two at once; no lock is left', async () => {
    const box = pgSandbox();
    const job = box.job('overlap');
    const env = through(box, poolers.usual as Pgbouncer);
    const log = box.path('record');
    const barrier = box.path('barrier');
    const args = ['-n', job, '--', fixture('hold.sh'), log, barrier];
    const first = start(args, env);
    await started(first, log);
    // The commands alive at once, sampled: a copy fenced (75, its heartbeat reached another
    // server backend) has its command stopped before it frees the lock, and another copy
    // may then run; two alive together would be the overlap of the issue.
    const starts = () => lines(log).filter((l) => l.startsWith('start ')).map((l) => Number(l.split(' ')[1]));
    let mostAlive = 0;
    const sampler = setInterval(() => {
      mostAlive = Math.max(mostAlive, starts().filter(isAlive).length);
    }, 10);
    const batches: ReturnType<typeof startMany>[] = [];
    try {
      for (let round = 0; round < 3; round++) {
        const before = starts().length;
        const batch = startMany(3, args, env);
        batches.push(batch);
        // Each copy ends (refused, skipped) or starts its command (after a fenced holder).
        await waitFor(() => batch.exited() + starts().length - before >= 3, 'the other copies to end or start');
      }
      release(barrier);
      const ended = await first.done;
      const others = (await Promise.all(batches.map((b) => b.done))).flat();
      console.log(`transaction pooling: exit codes of the first copy and the others: ${[ended, ...others].map((r) => r.code).join(' ')}; commands run: ${starts().length}`);
      expect([0, 75]).toContain(ended.code);
      for (const other of others) {
        if (other.code === 69) {
          expect(other.stderr.trim().split('\n')).toHaveLength(1);
          expect(other.stderr).toMatch(/pooled by transaction.*pool_mode = session/);
        } else expect([0, 75]).toContain(other.code);
      }
    } finally {
      clearInterval(sampler);
    }
    expect(mostAlive).toBe(1);
    await waitFor(async () => (await holders(job, box.schema)).length === 0, 'no backend to hold the lock');
    const rows = await pgRuns(box.schema);
    expect(rows).toHaveLength(starts().length);
    for (const row of rows) expect(['succeeded', 'lock_lost']).toContain(row.status);
  });

  for (const via of ['a session pool', 'a direct connection'] as const) {
    it(`fences the job when the lock's server backend is killed, behind ${via}`, async () => {
      const box = pgSandbox();
      const job = box.job('fence');
      const env = via === 'a session pool' ? through(box, poolers.session as Pgbouncer) : box.env;
      const log = box.path('record');
      const run = start(['-n', job, '--kill-after', '1s', '--', fixture('hold.sh'), log, box.path('barrier')], env);
      await started(run, log);
      const [backend] = await holders(job, box.schema);
      expect(backend).toBeDefined();
      const killed = Date.now();
      await sql('SELECT pg_terminate_backend($1)', [backend]);
      const result = await run.done;
      // Reported, not asserted: the time from the kill to the wrapper's exit.
      console.log(`fencing behind ${via}: ${Date.now() - killed} ms from pg_terminate_backend to exit ${result.code}`);
      expect(result.code).toBe(75);
      expect(result.stderr).toMatch(/lock lost: .*; command terminated/);
      expect(lines(log)).toHaveLength(1);
      const rows = await pgRuns(box.schema);
      expect(rows.map((r) => r.status)).toEqual(['lock_lost']);
    });
  }

  it("the outcome's lock_timeout holds through a transaction pool: a locked table cancels the write on the server", async () => {
    const box = pgSandbox();
    const job = box.job('bound');
    const env = through(box, poolers.usual as Pgbouncer);
    const log = box.path('record');
    const barrier = box.path('barrier');
    const run = start(['-n', job, '--', fixture('hold.sh'), log, barrier], env);
    await started(run, log);
    await waitFor(async () => (await pgRuns(box.schema))[0]?.child_pid != null, 'the child pid to be recorded');
    const maintenance = await holdingClient();
    try {
      await maintenance.query('BEGIN');
      await maintenance.query(`LOCK TABLE "${box.schema}".runs IN ACCESS EXCLUSIVE MODE`);
      release(barrier);
      const result = await run.done;
      expect(result.code).toBe(0);
      expect(result.stderr).toMatch(/lock timeout|canceling statement due to lock timeout/);
      // Still locked: had the server not cancelled it, the write would wait there yet, and
      // commit the moment the table is free.
      const waiting = await sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%finish%'`,
      );
      expect(waiting[0]?.n).toBe(0);
    } finally {
      await maintenance.query('ROLLBACK');
      await maintenance.end();
    }
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['running']);
    // The spooled outcome is delivered by the next run.
    expect((await cronguard(['-n', job, '--', 'true'], env)).code).toBe(0);
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });
  // A pooler that holds the admission (PgBouncer's PAUSE, a failover's switch) for a while: the
  // run is recorded as started when it got its lock, on the server's clock, not when it sent
  // the admission; else it seems to overlap the run before (issue 35, item 10).
  it('an admission held by PAUSE is recorded as started once it got its lock, for every lock kind', async () => {
    const pooler = await startPgbouncer({ poolMode: 'transaction', adminUser: true });
    const admin = new pg.Client({ connectionString: pooler.adminUrl });
    await admin.connect();
    try {
      for (const lock of ['lease', 'postgres', 'flock']) {
        const box = pgSandbox();
        const job = box.job(`paused-${lock}`);
        const env = through(box, pooler);
        // The schema made and known to this host: the admission is the run's first statement.
        expect(await cronguard(['-l', lock, '-n', job, '--', 'true'], env)).toMatchObject({ code: 0, stderr: '' });
        await admin.query('PAUSE test');
        const began = box.path('began');
        const run = start(['-l', lock, '-n', job, '--', 'sh', '-c', `date +%s%3N > ${began}`], env);
        await waitFor(async () => {
          const { rows } = await admin.query<{ application_name: string; state: string }>('SHOW CLIENTS');
          return rows.some((c) => c.application_name === `cronguard:${job}` && c.state === 'waiting');
        }, 'the admission to wait in the paused pool');
        const resumed = Date.now();
        await admin.query('RESUME test');
        expect(await run.done, lock).toMatchObject({ code: 0, stderr: '' });
        const [, row] = await pgRuns(box.schema);
        // The server's clock is this machine's: it got its lock after the pool resumed, and
        // before its command began.
        const startedAt = new Date(row?.started_at as string).getTime();
        expect(startedAt, lock).toBeGreaterThanOrEqual(resumed);
        expect(startedAt, lock).toBeLessThanOrEqual(Number(lines(began)[0]));
      }
    } finally {
      await admin.end();
      await pooler.stop();
    }
  });
});
