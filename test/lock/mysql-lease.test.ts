import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, isAlive, lines, release, serialRuns, start, startMany, waitFor } from '../helpers.js';
import { mysqlClient, mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';

// -l lease with a MySQL/MariaDB log: a row of the log's `leases` table, taken by the
// admission's transaction, renewed every third of --lease-ttl, fenced by its epoch.

interface LeaseRow {
  job: string;
  epoch: string;
  run_id: string | null;
  expires_at: Date;
}

async function leaseRows(database: string): Promise<LeaseRow[]> {
  return mysqlQuery<LeaseRow>(`SELECT job, CAST(epoch AS CHAR) AS epoch, CAST(run_id AS CHAR) AS run_id, expires_at FROM \`${database}\`.leases`);
}

async function runRows(database: string) {
  return mysqlQuery<{ id: number; status: string; overlaps: number; lock_backend: string; finished_at: Date | null }>(
    `SELECT id, status, overlaps, lock_backend, finished_at FROM \`${database}\`.runs ORDER BY id`,
  );
}

describe('-l lease with MySQL', () => {
  it('of 20 simultaneous invocations, exactly one runs; the others are counted as skips; the outcome releases the lease', async () => {
    const box = mysqlSandbox();
    const job = box.job('many');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const log = box.path('record');
    const barrier = box.path('barrier');
    const many = startMany(20, ['-l', 'lease', '-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => many.exited() === 19, 'all but one invocation to skip');
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    expect(await leaseRows(box.database)).toEqual([expect.objectContaining({ job, run_id: '1' })]);
    release(barrier);
    for (const result of await many.done) expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(serialRuns(log)).toBe(1);
    expect((await runRows(box.database)).map((r) => [r.status, r.overlaps, r.lock_backend])).toEqual([['succeeded', 19, 'lease']]);
    expect(await leaseRows(box.database)).toEqual([]);
  });

  it('the command\'s CRONGUARD_FENCING_TOKEN is the row\'s epoch, and grows from run to run', async () => {
    const box = mysqlSandbox();
    const job = box.job('token');
    const tokens: bigint[] = [];
    for (let i = 0; i < 2; i++) {
      const file = box.path(`fenced${i}`);
      const run = start(['-l', 'lease', '-n', job, '--', fixture('fenced.sh'), file], box.env);
      await waitFor(() => lines(file).length > 0, 'the command to start');
      const token = (lines(file)[0] as string).split(' ')[2] as string;
      const [row] = await leaseRows(box.database);
      expect(row?.epoch).toBe(token);
      tokens.push(BigInt(token));
      run.child.kill('SIGTERM');
      await run.done;
    }
    expect(tokens[1]).toBeGreaterThan(tokens[0] as bigint);
    expect(await leaseRows(box.database)).toEqual([]);
  });

  it('a DBA\'s DELETE of the lease mid-run: the holder stops its command, 75, lock_lost', async () => {
    const box = mysqlSandbox();
    const job = box.job('broken');
    const pids = box.path('pids');
    const run = start(['-l', 'lease', '--lease-ttl', '6s', '-n', job, '--kill-after', '1s', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the command to start');
    // A write's answer is its header, not rows.
    const gone = (await mysqlQuery(`DELETE FROM \`${box.database}\`.leases WHERE job = ?`, [job])) as unknown as { affectedRows: number };
    expect(gone.affectedRows).toBe(1);
    const result = await run.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(/^cronguard: .*: lock lost: lease of -?\d+ \(epoch \d+\): taken over or broken \(no longer this holder's\); command terminated/);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    expect((await runRows(box.database)).map((r) => r.status)).toEqual(['lock_lost']);
  });

  it('a SIGKILLed wrapper: the watchdog ends its command, and the next run starts only once the lease expired', async () => {
    const box = mysqlSandbox();
    const job = box.job('killed');
    const pids = box.path('pids');
    const run = start(['-l', 'lease', '--lease-ttl', '5s', '-n', job, '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the command to start');
    run.child.kill('SIGKILL');
    await run.done;
    // Nothing renews it now: this expiry is final.
    const [row] = await leaseRows(box.database);
    expect(row).toBeDefined();
    const expiry = (row as LeaseRow).expires_at.getTime();
    const next = box.path('next');
    const args = ['-l', 'lease', '--lease-ttl', '5s', '-n', job, '--', 'touch', next];
    // Right away: held, skipped.
    expect(await cronguard(args, box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(next)).toBe(false);
    await waitFor(() => lines(pids).map(Number).every((pid) => !isAlive(pid)), 'the watchdog to end the command');
    await waitFor(async () => (await cronguard(args, box.env)).code === 0 && existsSync(next), 'the next run once the lease expired');
    const rows = await runRows(box.database);
    // The killed run was abandoned by the admission that took the expired lease, on the
    // server's clock no sooner than the expiry.
    expect(rows.map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
    const killed = rows[0] as (typeof rows)[number];
    expect((killed.finished_at as Date).getTime()).toBeGreaterThanOrEqual(expiry);
    expect(killed.overlaps).toBeGreaterThanOrEqual(1);
  });

  it('locks and status list the lease: holder, run, epoch and expiry', async () => {
    const box = mysqlSandbox();
    const job = box.job('listed');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const run = start(['-l', 'lease', '-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the command to start');
    const [row] = await leaseRows(box.database);
    const locks = await cronguard(['locks'], box.env);
    expect(locks.code).toBe(0);
    const line = locks.stdout.split('\n').find((l) => l.startsWith(job));
    expect(line).toMatch(new RegExp(`^${job}\\s+lease\\s+\\S+\\s+${run.child.pid}\\s+.*\\s1\\s+epoch ${row?.epoch}, expires in \\d+s$`));
    const status = await cronguard(['status', job], box.env);
    expect(status.stdout).toMatch(new RegExp(`lease\\s+held by \\S+ pid ${run.child.pid}, run 1, epoch ${row?.epoch}, expires in \\d+s`));
    release(barrier);
    expect((await run.done).code).toBe(0);
    expect((await cronguard(['locks'], box.env)).stdout).not.toContain(job);
  });

  it('a DBA takes a job\'s lease with plain SQL (the key computed as cronguard does): the job is skipped until the DBA deletes it', async () => {
    const box = mysqlSandbox();
    const job = box.job('dba');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const D = `\`${box.database}\``;
    const key = `CAST(CONV(LEFT(SHA2(CONCAT('cronguard:', '${box.database}', ':', ?), 256), 16), 16, -10) AS SIGNED)`;
    const free = 'expires_at <= UTC_TIMESTAMP(6)';
    const client = await mysqlClient();
    try {
      await client.query('BEGIN');
      await client.query(`UPDATE ${D}.lease_epochs SET epoch = LAST_INSERT_ID(epoch + 1) WHERE id = 1`);
      await client.query(
        `INSERT INTO ${D}.leases (lock_key, job, host, pid, epoch, ttl_ms, expires_at)
         VALUES (${key}, ?, CONCAT('sql:', CURRENT_USER()), 0, LAST_INSERT_ID(), 3600000, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)
         ON DUPLICATE KEY UPDATE job = IF(${free}, ?, job), host = IF(${free}, CONCAT('sql:', CURRENT_USER()), host), pid = IF(${free}, 0, pid),
           run_id = IF(${free}, NULL, run_id), epoch = IF(${free}, LAST_INSERT_ID(), epoch), ttl_ms = IF(${free}, 3600000, ttl_ms),
           acquired_at = IF(${free}, UTC_TIMESTAMP(6), acquired_at), renewed_at = IF(${free}, UTC_TIMESTAMP(6), renewed_at),
           expires_at = IF(${free}, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, expires_at)`,
        [job, job, job],
      );
      const [taken] = (await client.query(`SELECT epoch = LAST_INSERT_ID() AS taken FROM ${D}.leases WHERE job = ?`, [job]))[0] as { taken: number }[];
      expect(taken?.taken).toBe(1);
      await client.query('COMMIT');
    } finally {
      await client.end();
    }
    const ran = box.path('ran');
    expect(await cronguard(['-l', 'lease', '-n', job, '--', 'touch', ran], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(ran)).toBe(false);
    expect((await cronguard(['locks'], box.env)).stdout).toMatch(new RegExp(`^${job}\\s+lease\\s+sql:root@\\S+\\s+0\\s.*no run row$`, 'm'));
    await mysqlQuery(`DELETE FROM ${D}.leases WHERE job = ?`, [job]);
    expect((await cronguard(['-l', 'lease', '-n', job, '--', 'touch', ran], box.env)).code).toBe(0);
    expect(existsSync(ran)).toBe(true);
    // The run's lease had the key the DBA's statement computed: the same row.
    const [row] = await mysqlQuery<{ same: number }>(`SELECT lock_key = CAST(${key} AS CHAR) AS same FROM ${D}.runs`, [job]);
    expect(Number(row?.same)).toBe(1);
  });
});
