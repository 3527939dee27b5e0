import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { collected, type Finished, fixture, lines, release, type Started, sandbox, spooled, start, waitFor, waitToSay } from '../helpers.js';
import { hasPgbouncer, type Pgbouncer, startPgbouncer } from '../pgbouncer.js';
import { clusterToolsMissing, makeCluster, type SmallCluster } from '../small-cluster.js';

// The PostgreSQL server restarts while an invocation waits (-w) for the lock another holds, as
// -l redis's waiter does (redis-break.test.ts): the waiter held nothing, so it connects again
// and waits for the server as for the lock; a server still down when the wait is over is 69.
// The holder lost its session and its lock with the restart: stopped, 75, recorded once. The
// shared test server must not be restarted: a cluster of this file's own.
let cluster: SmallCluster | null = null;

async function onCluster<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: (cluster as SmallCluster).url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

// Both invocations are connected: the holder, and the waiter, which (its schema stamp written
// by the holder) sends nothing but its admissions from then on.
const bothConnected = (job: string) => async () =>
  (await onCluster<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [`cronguard:${job}`]))[0]?.n === 2;

const missing = clusterToolsMissing();
describe.skipIf(missing !== null)(`a PostgreSQL server restarted while an invocation waits (-w)${missing ? `: skipped, ${missing}` : ''}`, () => {
  beforeAll(async () => {
    cluster = await makeCluster('cg_wait_restart', 20);
  }, 120_000);
  // A test that failed with the server down leaves it up for the next.
  afterEach(() => {
    if (cluster && !cluster.running()) cluster.start();
  });
  afterAll(() => {
    cluster?.drop();
  });

  // `url`: the cluster's, or a pooler's in front of it.
  const setUp = (schema: string, url = (cluster as SmallCluster).url) => {
    const box = sandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: url, CRONGUARD_SCHEMA: schema };
    return { box, env, log: box.path('record'), barrier: box.path('barrier'), ran: box.path('ran') };
  };
  const runs = (schema: string) => onCluster<{ status: string }>(`SELECT status FROM ${schema}.runs ORDER BY id`);

  it('the holder stops (75); the waiter connects again and runs (exit 0); each run recorded once', async () => {
    const c = cluster as SmallCluster;
    const { box, env, log, barrier, ran } = setUp('restart_wait');
    const holder = start(['-n', 'restart-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-v', '-w', '60s', '-n', 'restart-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitFor(bothConnected('restart-wait'), 'the waiter to connect');
    await waitToSay(waiter, said, /is held; waiting up to /, 'the waiter to wait');
    c.stop();
    const lost = await holder.done;
    expect(lost.code).toBe(75);
    expect(lost.stderr).toMatch(/cronguard: restart-wait: lock lost: [^\n]*; command terminated after \S+ \(run 1; cronguard logs 1\)\n$/);
    // Its record waits in the spool for the server (beside, if the restart caught the waiter's
    // admission in flight, that admission's, which ends its row if the server has one).
    expect(spooled(box.stateDir).filter((f) => f.includes(`_${holder.child.pid}_`))).toHaveLength(1);
    // The waiter found the server down at a try to connect again, and goes on waiting (refused,
    // or, caught while the server shut down, told so by it).
    await waitFor(() => /restart-wait: [^\n]*PostgreSQL at [^\n]*; waiting for it as for the lock\n/.test(said.stderr()), 'the waiter to find the server down');
    c.start();
    const result = await waiter.done;
    release(barrier);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/restart-wait: PostgreSQL reachable again\n/);
    expect(result.stderr).not.toMatch(/^cronguard: (cannot reach|PostgreSQL at)|connection lost|unavailable/m);
    expect(lines(ran)).toEqual(['ran']);
    expect(lines(log)).toEqual([expect.stringMatching(/^start /)]);
    // The waiter delivered the holder's record when it reached the server again.
    expect(spooled(box.stateDir)).toHaveLength(0);
    expect((await runs('restart_wait')).map((r) => r.status)).toEqual(['lock_lost', 'succeeded']);
  }, 120_000);

  it('a server still down when the wait is over: 69, one line, nothing run', async () => {
    const c = cluster as SmallCluster;
    const { box, env, log, barrier, ran } = setUp('down_wait');
    const holder = start(['-n', 'down-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-w', '3s', '-n', 'down-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    await waitFor(bothConnected('down-wait'), 'the waiter to connect');
    c.stop();
    const result = await waiter.done;
    expect((await holder.done).code).toBe(75);
    release(barrier);
    c.start();
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/^cronguard: cannot reach PostgreSQL at postgres@127\.0\.0\.1:\d+\/test: ECONNREFUSED\n$/);
    expect(lines(ran)).toEqual([]);
    // Only the holder's run, started before the restart; its end waits in the spool (beside,
    // if the restart caught the waiter's admission in flight, that admission's: nothing ran).
    expect((await runs('down_wait')).map((r) => r.status)).toEqual(['running']);
    expect(spooled(box.stateDir).filter((f) => f.includes(`_${holder.child.pid}_`))).toHaveLength(1);
  }, 120_000);

  it('--no-log (the lock alone): the waiter connects again and runs; a server still down past its wait, 69', async () => {
    const c = cluster as SmallCluster;
    const { box, env, log, barrier, ran } = setUp('no_log_wait');
    const holder = start(['--no-log', '-n', 'nolog-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['--no-log', '-v', '-w', '60s', '-n', 'nolog-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitFor(bothConnected('nolog-wait'), 'the waiter to connect');
    // Connected, it may still be setting up its session: a server lost then is a first
    // connection's failure (69). Once it waits, it is not.
    await waitToSay(waiter, said, /is held; waiting up to /, 'the waiter to wait');
    c.stop();
    expect((await holder.done).code).toBe(75);
    await waitFor(() => /nolog-wait: [^\n]*PostgreSQL at [^\n]*; waiting for it as for the lock\n/.test(said.stderr()), 'the waiter to find the server down');
    c.start();
    const result = await waiter.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/nolog-wait: PostgreSQL reachable again\n/);
    expect(lines(ran)).toEqual(['ran']);

    const [again, stillDown] = [box.path('again'), box.path('still-down')];
    const second = start(['--no-log', '-n', 'nolog-wait', '--', fixture('hold.sh'), again, barrier], env);
    await waitFor(() => lines(again).length > 0, 'the second holder to start its command');
    const late = start(['--no-log', '-v', '-w', '3s', '-n', 'nolog-wait', '--', 'sh', '-c', `echo ran >> ${stillDown}`], env);
    const lateSaid = collected(late);
    await waitFor(bothConnected('nolog-wait'), 'the second waiter to connect');
    await waitToSay(late, lateSaid, /is held; waiting up to /, 'the second waiter to wait');
    c.stop();
    const down = await late.done;
    expect((await second.done).code).toBe(75);
    release(barrier);
    c.start();
    expect(down.code).toBe(69);
    expect(down.stderr.trimEnd().split('\n').at(-1)).toMatch(/^cronguard: cannot reach PostgreSQL at postgres@127\.0\.0\.1:\d+\/test: ECONNREFUSED$/);
    expect(lines(stillDown)).toEqual([]);
  }, 120_000);

  it('-l lease: the holder keeps its lease through the restart; the waiter connects again and runs after it', async () => {
    const c = cluster as SmallCluster;
    const { box, env, log, barrier, ran } = setUp('lease_wait');
    const holder = start(['-l', 'lease', '-n', 'lease-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-l', 'lease', '-v', '-w', '60s', '-n', 'lease-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitFor(() => said.stderr().includes('is held; waiting up to 1m00s for it'), 'the waiter to wait');
    c.stop();
    await waitFor(() => /lease-wait: [^\n]*PostgreSQL at [^\n]*; waiting for it as for the lock\n/.test(said.stderr()), 'the waiter to find the server down');
    c.start();
    await waitFor(() => said.stderr().includes('lease-wait: PostgreSQL reachable again'), 'the waiter to connect again');
    release(barrier);
    const [held, result] = await Promise.all([holder.done, waiter.done]);
    expect(held).toMatchObject({ code: 0, stderr: '' });
    expect(result.code).toBe(0);
    expect(lines(ran)).toEqual(['ran']);
    expect(lines(log)).toEqual([expect.stringMatching(/^start /), expect.stringMatching(/^end /)]);
    expect(spooled(box.stateDir)).toHaveLength(0);
    expect((await runs('lease_wait')).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  }, 120_000);

  // A server that takes connections but never answers (its postmaster stopped): the waiter,
  // whose session was ended meanwhile, connects again into a connection that hangs. The wait's
  // end, or a signal, ends it then, not the URL's connect_timeout (here 600 s, past the test's
  // own timeout). The holder's backend, already running, keeps the lock.
  describe('the waiter connects again to a server that never answers', () => {
    // A failed test's postmaster must go on, for the next test and for the cluster's drop.
    let resumeHung: (() => void) | null = null;
    afterEach(() => {
      resumeHung?.();
      resumeHung = null;
    });
    const hang = async (job: string, waiterBackendPid: number, waiterPid: number) => {
      const c = cluster as SmallCluster;
      const postmaster = Number(readFileSync(`/var/lib/postgresql/15/${c.name}/postmaster.pid`, 'utf8').split('\n')[0]);
      process.kill(postmaster, 'SIGSTOP');
      process.kill(waiterBackendPid, 'SIGTERM');
      // The waiter's new connection, accepted by the kernel, never answered.
      await waitFor(() => execFileSync('ss', ['-Htnp', 'state', 'established', 'dport', `= :${c.port}`]).toString().includes(`pid=${waiterPid},`) &&
        !execFileSync('ss', ['-Htnp', 'state', 'established', 'dport', `= :${c.port}`]).toString().includes(`${waiterBackendPid}`), `${job}'s waiter to connect again`);
      resumeHung = () => process.kill(postmaster, 'SIGCONT');
      return resumeHung;
    };
    const waiterBackend = async (job: string) =>
      (await onCluster<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)`, [`cronguard:${job}`]))[0]?.pid as number;

    // A holder, and a waiter (-w `wait`) whose server hangs as it connects again; `end` ends
    // the waiter. Then the server goes on, the holder ends as usual, and the waiter ran nothing.
    const hungWaiter = async (schema: string, job: string, wait: string, end: (waiter: Started) => Promise<Finished>): Promise<Finished> => {
      const { env, log, barrier, ran } = setUp(schema);
      const url = `${(cluster as SmallCluster).url}?connect_timeout=600`;
      const holder = start(['-n', job, '--', fixture('hold.sh'), log, barrier], env);
      await waitFor(() => lines(log).length > 0, 'the holder to start its command');
      const waiter = start(['--db', url, '-w', wait, '-n', job, '--', 'sh', '-c', `echo ran >> ${ran}`], env);
      await waitFor(bothConnected(job), 'the waiter to connect');
      const resume = await hang(job, await waiterBackend(job), waiter.child.pid as number);
      let result: Finished;
      try {
        result = await end(waiter);
      } finally {
        resume();
      }
      release(barrier);
      expect((await holder.done).code).toBe(0);
      expect(lines(ran)).toEqual([]);
      return result;
    };

    it('the wait over: 69, one line that says it timed out, nothing run', async () => {
      const result = await hungWaiter('hung_wait', 'hung-wait', '4s', (waiter) => waiter.done);
      expect(result.code).toBe(69);
      expect(result.stderr).toMatch(/^cronguard: cannot reach PostgreSQL at postgres@127\.0\.0\.1:\d+\/test: ETIMEDOUT\n$/);
    }, 120_000);

    it('SIGTERM: 143 at once, one line, nothing run', async () => {
      const result = await hungWaiter('hung_term', 'hung-term', '10m', (waiter) => {
        waiter.child.kill('SIGTERM');
        return waiter.done;
      });
      expect(result.code).toBe(143);
      expect(result.stderr).toMatch(/^cronguard: hung-term: stopped by SIGTERM before the command started; nothing ran\n$/);
    }, 120_000);
  });

  // Through a session-mode PgBouncer, as many fleets connect: the pooler stays up while its
  // server restarts, and takes the waiter's statements into its queue, where nothing answers
  // them. The waiter still ends when its wait is over (69, one line), not at the statement's
  // own timeout.
  describe.skipIf(!hasPgbouncer)(`through PgBouncer${hasPgbouncer ? '' : ': skipped, PgBouncer is not installed'}`, () => {
    let pooler: Pgbouncer | null = null;
    beforeAll(async () => {
      // Its own timeouts for a server that does not answer are past any of cronguard's, so
      // that only the waiter's own bound can end a statement held in its queue; a failed login
      // is tried again after a second, so that the next test's holder gets through.
      const settings = { server_connect_timeout: 600, query_wait_timeout: 600, server_login_retry: 1 };
      pooler = await startPgbouncer({ poolMode: 'session', poolSize: 10, target: (cluster as SmallCluster).url, settings });
    }, 120_000);
    afterAll(async () => {
      await pooler?.stop();
    });

    // A holder, and a waiter (-w 4s) that waits for it, both through the pooler.
    const bothThroughPooler = async (schema: string, job: string, wait = '4s') => {
      const set = setUp(schema, (pooler as Pgbouncer).url);
      const holder = start(['-n', job, '--', fixture('hold.sh'), set.log, set.barrier], set.env);
      await waitFor(() => lines(set.log).length > 0, 'the holder to start its command');
      const waiter = start(['-v', '-w', wait, '-n', job, '--', 'sh', '-c', `echo ran >> ${set.ran}`], set.env);
      const said = collected(waiter);
      await waitFor(() => said.stderr().includes('is held; waiting up to '), 'the waiter to wait');
      await waitFor(bothConnected(job), 'the waiter to connect');
      return { ...set, holder, waiter };
    };

    it('a server still down when the wait is over: 69, one line, nothing run', async () => {
      const { box, barrier, ran, holder, waiter } = await bothThroughPooler('pool_down', 'pool-down');
      (cluster as SmallCluster).stop();
      const result = await waiter.done;
      expect((await holder.done).code).toBe(75);
      release(barrier);
      (cluster as SmallCluster).start();
      expect(result.code).toBe(69);
      expect(result.stderr.trimEnd().split('\n').at(-1)).toMatch(/^cronguard: (cannot reach PostgreSQL|PostgreSQL) at postgres@127\.0\.0\.1:\d+\/test: /);
      expect(lines(ran)).toEqual([]);
      // The holder's run, whose end waits in the spool (and, should the pooler pass the
      // waiter's queued admission on once the server is back, that row of a run never started).
      expect((await runs('pool_down')).map((r) => r.status).filter((status) => status !== 'running')).toEqual([]);
      expect(spooled(box.stateDir).filter((f) => f.includes(`_${holder.child.pid}_`))).toHaveLength(1);
    }, 120_000);

    // The server hangs (its postmaster stopped) and the waiter's backend ends: the pooler
    // closes its client, which logs in again at once (the pooler answers a login itself) and
    // sends its admission into a queue that waits for a server connection. Before, the
    // statement's own timeout (30 s) ended it: `Query read timeout`, long past the wait.
    it('a hung server: the statement in the queue ends with the wait, 69, one line, nothing run', async () => {
      const c = cluster as SmallCluster;
      const { barrier, ran, holder, waiter } = await bothThroughPooler('pool_hung', 'pool-hung');
      const [{ pid: backend }] = (await onCluster<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE application_name = 'cronguard:pool-hung' AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)`,
      )) as [{ pid: number }];
      const postmaster = Number(readFileSync(`/var/lib/postgresql/15/${c.name}/postmaster.pid`, 'utf8').split('\n')[0]);
      process.kill(postmaster, 'SIGSTOP');
      let result: Finished;
      try {
        process.kill(backend, 'SIGTERM');
        result = await waiter.done;
      } finally {
        process.kill(postmaster, 'SIGCONT');
      }
      release(barrier);
      expect((await holder.done).code).toBe(0);
      expect(result.code).toBe(69);
      // Its statement held in the queue, or (the pooler waiting for the server to log it in
      // again) its try to connect again: neither answered before the wait was over.
      expect(result.stderr.trimEnd().split('\n').at(-1)).toMatch(
        /^cronguard: (PostgreSQL at postgres@127\.0\.0\.1:\d+\/test: connection lost: no answer before the wait was over|cannot reach PostgreSQL at postgres@127\.0\.0\.1:\d+\/test: ETIMEDOUT)$/,
      );
      expect(lines(ran)).toEqual([]);
      // Only the holder's run succeeded. The pooler may still pass the waiter's queued
      // admission on once the server answers (it does not notice a client gone while it
      // waits): a row of a run that never started, which its spooled record, or the next
      // admission on this host, ends as abandoned.
      expect((await runs('pool_hung')).map((r) => r.status).filter((status) => status === 'succeeded')).toEqual(['succeeded']);
    }, 120_000);

    // pg gives up on a statement unanswered for 30 s (`Query read timeout`) but keeps its
    // connection: a waiter whose admission the pooler held in its queue ended there (69), with
    // most of its wait to go. Its session is lost instead, and it connects again and waits on.
    it('a hung server back within the wait, after the statement timed out: the waiter runs after the holder', async () => {
      const c = cluster as SmallCluster;
      const p = pooler as Pgbouncer;
      const { barrier, ran, holder, waiter } = await bothThroughPooler('pool_back', 'pool-back', '5m');
      const [{ pid: backend }] = (await onCluster<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE application_name = 'cronguard:pool-back' AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)`,
      )) as [{ pid: number }];
      const postmaster = Number(readFileSync(`/var/lib/postgresql/15/${c.name}/postmaster.pid`, 'utf8').split('\n')[0]);
      // When the pooler logged each client in (its log's own clock).
      const logins = () => p.log().split('\n').flatMap((line) => (line.includes('login attempt') ? [Date.parse(line.slice(0, 23).replace(' ', 'T') + 'Z')] : []));
      process.kill(postmaster, 'SIGSTOP');
      try {
        const before = logins().length;
        process.kill(backend, 'SIGTERM');
        // Its login once the pooler closed it, and another once its statement, sent then,
        // went unanswered for 30 s.
        const timedOut = () => {
          const since = logins().slice(before);
          return since.length >= 2 && (since.at(-1) as number) - (since[0] as number) >= 30_000;
        };
        await waitFor(() => timedOut() || waiter.child.exitCode !== null, 'the waiter to connect again after its statement timed out', 110_000);
      } finally {
        process.kill(postmaster, 'SIGCONT');
      }
      expect(waiter.child.exitCode).toBeNull();
      release(barrier);
      expect((await holder.done).code).toBe(0);
      const result = await waiter.done;
      expect(result.code).toBe(0);
      expect(lines(ran)).toEqual(['ran']);
      expect((await runs('pool_back')).map((r) => r.status).filter((status) => status === 'succeeded')).toEqual(['succeeded', 'succeeded']);
    }, 240_000);
  });
});
