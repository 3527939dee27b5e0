import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { besides, cronguard, fixture, lines, release, start, startMany, waitFor } from '../helpers.js';
import { mysqlClient, mysqlQuery, mysqlSandbox, mysqlUrl } from '../mysql-helpers.js';
import { mysqlProxy } from '../mysql-proxy.js';

// Faults found by trying to break the MySQL mode, each fixed and kept here: a partition, a
// server's odd sql_mode, an account's connection limit, table locks, an oversized output, a
// stopped wrapper, a locked job row. Slow (a partition waits out the server's minute), so a
// field test: CI runs it once.

const users: string[] = [];
afterEach(async () => {
  for (const user of users.splice(0)) await mysqlQuery(`DROP USER IF EXISTS '${user}'@'%'`);
});

describe('breaker: MySQL mode under faults', () => {
  // After a partition the wrapper stops its command (75); the server kept the stranded
  // session, and its GET_LOCK, until its wait_timeout (8 h by default), and every later run
  // skipped in silence. The lock's session now asks to be ended after a minute of silence.
  it('a partition mid-run does not strand the lock on the server: a later run gets it within a minute', async () => {
    const box = mysqlSandbox();
    const job = box.job('parted');
    const net = await mysqlProxy();
    const started = box.path('started');
    const run = start(['-n', job, '--kill-after', '1s', '--', 'sh', '-c', `touch ${started}; exec sleep 120`], { ...box.env, CRONGUARD_DATABASE_URL: net.url });
    await waitFor(() => existsSync(started), 'the command to start');
    const [held] = await mysqlQuery<{ id: number | null }>('SELECT IS_USED_LOCK(?) AS id', [mysqlLockName(box.database, job)]);
    expect(held?.id).not.toBeNull();
    net.partition();
    const first = await run.done;
    expect(first.code).toBe(75);
    // The network is back for everyone else; the stranded session still holds the name.
    const after = await cronguard(['-n', job, '-w', '60s', '--', 'touch', box.path('second')], box.env);
    expect(after).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(box.path('second'))).toBe(true);
  });

  // Found: a per-account connection limit (CREATE USER ... WITH MAX_USER_CONNECTIONS, shared
  // hosting's usual limit) answers 1226, which is not retried as 1040/1203 are: of a burst of
  // invocations, those refused a connection exit 69 with an error each (cron mails them), and
  // their skips are not counted on the run.
  it('a burst against an account with MAX_USER_CONNECTIONS: one run, the others skip (retried, not 69)', async () => {
    const box = mysqlSandbox();
    const job = box.job('limited');
    const user = `cgb_${randomBytes(4).toString('hex')}`;
    users.push(user);
    await mysqlQuery(`CREATE USER '${user}'@'%' WITH MAX_USER_CONNECTIONS 4`);
    await mysqlQuery(`GRANT ALL ON \`${box.database}\`.* TO '${user}'@'%'`);
    const url = new URL(mysqlUrl());
    url.username = user;
    url.password = '';
    url.pathname = '/';
    const env = { ...box.env, CRONGUARD_DATABASE_URL: url.toString() };
    expect((await cronguard(['migrate'], env)).code).toBe(0);
    const log = box.path('record');
    const barrier = box.path('barrier');
    const many = startMany(8, ['-n', job, '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => many.exited() === 7, 'all but one invocation to end');
    release(barrier);
    const results = await many.done;
    expect(results.map((r) => r.code)).toEqual(Array(8).fill(0));
    expect(results.filter((r) => r.stderr !== '')).toEqual([]);
    const rows = await mysqlQuery<{ status: string; overlaps: number }>(`SELECT status, overlaps FROM \`${box.database}\`.runs WHERE job = ?`, [job]);
    expect(rows).toMatchObject([{ status: 'succeeded', overlaps: 7 }]);
  });

  // Found: the session does not set its own sql_mode, so a server whose global sql_mode has
  // NO_BACKSLASH_ESCAPES reads mysql2's `\'` escaping as the end of a string: every value with
  // a quote breaks its statement (a run's record goes to the spool, `request` is an internal
  // error with a stack trace, 70), and a value can inject SQL: `--by` (or the API's `by`)
  // below adds a second request row of its own. The session should SET sql_mode itself.
  // This test changes the server's GLOBAL sql_mode for well under a second (restored in finally).
  it('NO_BACKSLASH_ESCAPES in the server default: a value cannot inject SQL', async () => {
    const box = mysqlSandbox();
    const job = box.job('nbe');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const [{ mode }] = (await mysqlQuery<{ mode: string }>('SELECT @@GLOBAL.sql_mode AS mode')) as [{ mode: string }];
    let result: Awaited<ReturnType<typeof cronguard>> | undefined;
    try {
      await mysqlQuery('SET GLOBAL sql_mode = ?', [`${mode},NO_BACKSLASH_ESCAPES`]);
      result = await cronguard(['request', job, '--by', "x'), (0x6d31, 0x5b5d, UTC_TIMESTAMP(6), 0x70776e) -- "], box.env);
    } finally {
      await mysqlQuery('SET GLOBAL sql_mode = ?', [mode]);
    }
    expect(result?.stderr).not.toMatch(/internal error|\n\s+at /);
    const rows = await mysqlQuery<{ job: string; requested_by: string }>(`SELECT job, requested_by FROM \`${box.database}\`.requests ORDER BY id`);
    expect(rows.filter((r) => r.requested_by === 'pwn')).toEqual([]);
    expect(result?.code).toBe(0);
    expect(rows).toEqual([{ job, requested_by: "x'), (0x6d31, 0x5b5d, UTC_TIMESTAMP(6), 0x70776e) -- " }]);
  });
  // Found: the session bounds row locks (innodb_lock_wait_timeout = 5) but not metadata locks
  // (lock_wait_timeout, 1 day by default). A LOCK TABLES (mysqldump --lock-tables, an ALTER
  // waiting its turn, a backup's FLUSH TABLES WITH READ LOCK) on the log's tables holds a run's
  // admission with no word on stderr until the driver's 30 s statement timeout, and then the run
  // ends 69 "cannot reach MySQL ... PROTOCOL_SEQUENCE_TIMEOUT" (the server answered all along)
  // after minutes, having run nothing. Setting lock_wait_timeout = 5 beside it would make this
  // the row lock's case: the run goes ahead and spools its record, with one line.
  it('a LOCK TABLES on the log: the run is not held for minutes, and the message is not "cannot reach"', async () => {
    const box = mysqlSandbox();
    const job = box.job('mdl');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    const holder = await mysqlClient();
    try {
      await holder.query(`LOCK TABLES \`${box.database}\`.runs WRITE, \`${box.database}\`.jobs WRITE`);
      const run = start(['-n', job, '--', 'touch', box.path('ran')], box.env);
      let finished = false;
      void run.done.then(() => (finished = true));
      // A bound that only tells a hang from an answer: a fixed run ends within ~20 s.
      await waitFor(() => finished, 'the run to end while the tables are locked', 90_000);
      const result = await run.done;
      expect(result.stderr).not.toMatch(/cannot reach MySQL/);
      expect(result.code).toBe(0);
      expect(existsSync(box.path('ran'))).toBe(true);
    } finally {
      await holder.end();
    }
  });
  // Found: an outcome bigger than the server's max_allowed_packet (MariaDB's default 16 MiB;
  // --capture above it, as the notes warn) goes to the spool, and the spool is delivered by
  // every later run before its own record: the server drops the connection on the oversized
  // packet, and the run then fails on the closed session, 69 "Can't add new command when
  // connection is in closed state", running nothing. Every job of that log on that machine is
  // stopped until someone deletes the spool file, and each failed run spools one more record.
  // The outcome should fit the packet (truncate the output, output_truncated) or a record that
  // the server refuses should be set aside, not block the runs behind it.
  it('an outcome over max_allowed_packet does not stop every later run (poisoned spool)', async () => {
    const box = mysqlSandbox();
    const [{ packet }] = (await mysqlQuery<{ packet: number }>('SELECT @@GLOBAL.max_allowed_packet AS packet')) as [{ packet: number }];
    const bytes = Number(packet) + 1_000_000;
    const big = await cronguard(['-n', box.job('big'), '--capture', String(bytes + 1000), '--', 'sh', '-c', `head -c ${bytes} /dev/zero | tr '\\0' y`], box.env);
    expect(big.code).toBe(0);
    const next = await cronguard(['-n', box.job('other'), '--', 'touch', box.path('ran')], box.env);
    expect(next.stderr).not.toMatch(/closed state/);
    expect(next.code).toBe(0);
    expect(existsSync(box.path('ran'))).toBe(true);
    const rows = await mysqlQuery<{ job: string; status: string }>(`SELECT job, status FROM \`${box.database}\`.runs ORDER BY id`);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });
  // Found: the mysql lock gives the watchdog no heartbeat (Lock.heartbeat null), so a wrapper
  // that is stopped (SIGSTOP, a debugger, a stalled cgroup) cannot stop its command when the
  // server drops its connection (wait_timeout, a KILL, a restart): the server frees the name and
  // the next invocation runs beside the first command. Checked by hand with a KILL of the
  // stopped wrapper's connection: the second run's command saw the first's alive. Here the
  // server drops it by itself: a fixed lock feeds the watchdog beats (as the lease does) and
  // its limit ends the command before the server can free the name; unfixed, the second run
  // either never gets the lock within its wait (wait_timeout 8 h) or runs beside the first.
  it('a stopped wrapper: its command is ended before the server can give the lock to another run', async () => {
    const box = mysqlSandbox();
    const job = box.job('stopped');
    const pids = box.path('pids');
    const first = start(['-n', job, '--', 'sh', '-c', `echo $$ > ${pids}; exec sleep 1000`], box.env);
    await waitFor(() => lines(pids).length === 1, 'the command to start');
    first.child.kill('SIGSTOP');
    try {
      const own = Number(lines(pids)[0]);
      const seen = box.path('seen');
      const second = await cronguard(['-n', job, '-w', '120s', '--', ...besides(own, seen)], box.env);
      expect(second.code).toBe(0);
      expect(lines(seen)).toEqual(['alone']);
    } finally {
      first.child.kill('SIGCONT');
      first.child.kill('SIGTERM');
      await first.done;
    }
  });

  // When the job's row stays locked by another transaction (a DBA's, a stuck writer's), the
  // admission gives up after its retries (~20 s) and the run goes on under the GET_LOCK alone,
  // its record spooled, as with PostgreSQL: a log that cannot be asked never stops a job (docs/guarantees.md:
  // "A run log that cannot be written never stops a job"), so a job paused in that log runs,
  // and an --on-request run runs as with a log that cannot answer, without a request.
  for (const [what, args, runs] of [
    ['a paused job runs, saying the log could not be asked', [] as string[], true],
    ['--on-request runs without a request, saying the log could not be asked', ['--on-request'], true],
  ] as const) {
    it(`the job's row locked by another transaction: ${what}`, async () => {
      const box = mysqlSandbox();
      const job = box.job('rowlock');
      expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
      if (args.length === 0) expect((await cronguard(['disable', job, '--reason', 'maintenance'], box.env)).code).toBe(0);
      const holder = await mysqlClient();
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT * FROM \`${box.database}\`.jobs WHERE name = ? FOR UPDATE`, [job]);
        const result = await cronguard(['-n', job, ...args, '--', 'touch', box.path('ran')], box.env);
        expect(existsSync(box.path('ran'))).toBe(runs);
        expect(result.code).toBe(0);
        expect(result.stderr).toMatch(/^cronguard: run log \S+ \(database \w+\) unavailable \(record the start: [^\n]*Lock wait timeout[^\n]*\)[^\n]*\n$/);
      } finally {
        await holder.query('ROLLBACK').catch(() => {});
        await holder.end();
      }
    });
  }
});
