import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { MYSQL_MIGRATIONS } from '../../src/store/mysql/migration-files.js';
import { mysqlQuery, mysqlSandbox, mysqlUrl } from '../mysql-helpers.js';
import { admitted, freshStore, mysqlStore, newRun, outcome, RULES } from './mysql-stores.js';

describe('mysql run log: schema', () => {
  it('migrate creates the database and every table, and is idempotent', async () => {
    const { store, database } = await freshStore();
    expect(await store.migrate()).toBe(MYSQL_MIGRATIONS.length);
    expect(await store.migrate()).toBe(MYSQL_MIGRATIONS.length);
    const tables = await mysqlQuery<{ name: string }>('SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY 1', [database]);
    expect(tables.map((t) => t.name).sort()).toEqual(['fleet_pause', 'housekeeping', 'jobs', 'lease_epochs', 'leases', 'pause_events', 'requests', 'run_counts', 'runs', 'schema_migrations', 'slot_ticks', 'stop_requests']);
    const versions = await mysqlQuery(`SELECT version, complete FROM \`${database}\`.schema_migrations ORDER BY version`);
    expect(versions).toEqual(MYSQL_MIGRATIONS.map((_, i) => ({ version: i + 1, complete: 1 })));
  });

  it('is migrated once when 10 migrators start at once', async () => {
    const box = mysqlSandbox();
    const stores = await Promise.all(Array.from({ length: 10 }, () => mysqlStore(box.database)));
    const versions = await Promise.all(stores.map((s) => s.migrate()));
    expect(versions).toEqual(Array(10).fill(MYSQL_MIGRATIONS.length));
    expect(await mysqlQuery(`SELECT version, steps, complete FROM \`${box.database}\`.schema_migrations`)).toHaveLength(MYSQL_MIGRATIONS.length);
  });

  it('resumes a migration stopped half way', async () => {
    const { store, database } = await freshStore();
    await store.migrate();
    // As if the migrator died after its third statement: the rest are tried again.
    await mysqlQuery(`UPDATE \`${database}\`.schema_migrations SET steps = 3, complete = FALSE`);
    await mysqlQuery(`DROP TABLE \`${database}\`.run_counts, \`${database}\`.housekeeping`);
    expect(await store.migrate()).toBe(MYSQL_MIGRATIONS.length);
    expect(await mysqlQuery(`SELECT COUNT(*) AS n FROM \`${database}\`.housekeeping`)).toEqual([{ n: 0 }]);
  });

  it('takes a column already added as done, when the migrator died before recording that step', async () => {
    const { store, database } = await freshStore();
    await store.migrate();
    // 0006 (maintenance) adds a column of jobs, then creates tables if missing and inserts
    // their row if missing: run again whole, it finds the column there (1060), the rest done.
    // The migrator died there: the later migrations never ran.
    const maintenance = 6;
    await mysqlQuery(`DROP TABLE \`${database}\`.stop_requests`);
    await mysqlQuery(`DELETE FROM \`${database}\`.schema_migrations WHERE version > ?`, [maintenance]);
    await mysqlQuery(`UPDATE \`${database}\`.schema_migrations SET steps = 0, complete = FALSE WHERE version = ?`, [maintenance]);
    expect(await store.migrate()).toBe(MYSQL_MIGRATIONS.length);
    expect(await mysqlQuery(`SELECT version, steps, complete FROM \`${database}\`.schema_migrations WHERE version = ?`, [maintenance])).toEqual([{ version: maintenance, steps: 4, complete: 1 }]);
  });

  it('a reader finds no log without creating one', async () => {
    const box = mysqlSandbox();
    const reader = await mysqlStore(box.database, false);
    await expect(reader.listRuns({ limit: 10 })).rejects.toMatchObject({ exitCode: 1 });
    expect(await mysqlQuery('SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?', [box.database])).toEqual([]);
  });
});

// Accounts made for a test (the server's, not a database's), dropped after it.
const accounts: string[] = [];
afterEach(async () => {
  for (const user of accounts.splice(0)) await mysqlQuery(`DROP USER IF EXISTS '${user}'@'%'`);
});

// A URL for a new account with `grants` (statements with ACCOUNT in place of its name).
async function account(grants: readonly string[]): Promise<string> {
  const user = `cg_${randomBytes(5).toString('hex')}`;
  accounts.push(user);
  await mysqlQuery(`CREATE USER '${user}'@'%' IDENTIFIED BY 'pw'`);
  for (const grant of grants) await mysqlQuery(grant.replace('ACCOUNT', `'${user}'@'%'`));
  const url = new URL(mysqlUrl());
  url.username = user;
  url.password = 'pw';
  // No database to connect to: the tables' is named in every statement.
  url.pathname = '';
  return url.toString();
}

describe('mysql run log: privileges', () => {
  it('tells a user who may not create the database so (77)', async () => {
    const box = mysqlSandbox();
    const store = await mysqlStore(box.database, true, await account([]));
    await expect(store.migrate()).rejects.toMatchObject({ exitCode: 77, message: expect.stringMatching(/cannot create or upgrade cronguard's tables in database t_/) });
    await expect(store.admit(newRun(box.job('x')), RULES)).rejects.toMatchObject({ exitCode: 77 });
  });

  it('runs on a current log with only SELECT, INSERT, UPDATE and DELETE', async () => {
    const { store: owner, database, job } = await freshStore();
    await owner.migrate();
    const store = await mysqlStore(database, true, await account([`GRANT SELECT, INSERT, UPDATE, DELETE ON \`${database}\`.* TO ACCOUNT`]));
    const id = await admitted(store, newRun(job('least')));
    await store.finishRun(id, outcome(), true);
    expect(await store.getRun(id)).toMatchObject({ status: 'succeeded' });
  });
});

describe('mysql run log: runs', () => {
  it('records every column of an admitted and finished run', async () => {
    const { store, job } = await freshStore();
    const name = job('cols');
    const tick = new Date(Math.floor(Date.now() / 60_000) * 60_000);
    const run = newRun(name, { tick, lockBackend: 'mysql', lockKey: 'cg:abc', slot: 2, maxRunning: 3 });
    const before = Date.now();
    const id = await admitted(store, run);
    const after = Date.now();
    await store.setChildPid(id, 999, 'echo hi there');
    const finishedAt = new Date(run.startedAt.getTime() + 1500);
    const output = 'out ✓ 😀\0end\n';
    expect(await store.finishRun(id, outcome({ status: 'failed', exitCode: 3, finishedAt, output, outputTruncated: true, error: 'boom' }), true)).toBe(false);
    const row = await store.getRun(id);
    // When the admission took its lock, on the server's clock (this machine's).
    const startedAt = Date.parse(row?.started_at as string);
    expect(startedAt).toBeGreaterThanOrEqual(before - 1);
    expect(startedAt).toBeLessThanOrEqual(after);
    expect(row).toEqual({
      id, job: name, status: 'failed', trigger: 'cron', attempt: 1, host: 'host-a', pid: 4242, child_pid: 999, username: 'alice',
      command: 'echo hi there', started_at: new Date(startedAt).toISOString(), finished_at: finishedAt.toISOString(), duration_ms: 1500,
      exit_code: 3, signal: null, output, output_truncated: true, overlaps: 0, request_id: null, error: 'boom', tick: tick.toISOString(),
      lock_backend: 'mysql', lock_key: 'cg:abc', run_key: run.runKey, invoked_at: run.invokedAt.toISOString(), wrapper_start: 'boot:1',
      slot: 2, max_running: 3,
    });
    expect(await store.latestRun(name)).toEqual(row);
    const [listed] = await store.listRuns({ jobs: [name], limit: 5 });
    expect(listed).toEqual({ ...row, output: null });
    expect(await store.runTail(id, 4)).toEqual({ ...row, output: 'end\n', output_cut: true });
    const [status] = await store.jobStatus(name);
    expect(status).toMatchObject({
      job: name, state: 'idle', last_run_id: id, last_status: 'failed', last_exit_code: 3, command: 'echo hi', host: 'host-a',
      runs_total: { failed: 1 }, recent: [{ id, status: 'failed', duration_ms: 1500, retried: false }], pending_requests: 0,
    });
  });

  it('counts skips on the running row, and parked ones in its outcome', async () => {
    const { store, job } = await freshStore();
    const name = job('skips');
    // Skipped before any row exists: parked on the job.
    expect(await store.recordOverlap(name, null, null)).toBeNull();
    const id = await admitted(store, newRun(name));
    expect(await store.recordOverlap(name, null, null)).toMatchObject({ runId: id, host: 'host-a', pid: 4242 });
    expect(await store.recordOverlap(name, 'host-b', null)).toBeNull();
    await store.finishRun(id, outcome(), true);
    expect((await store.getRun(id))?.overlaps).toBe(3);
    const [parked] = await mysqlQuery<{ n: number }>(`SELECT pending_overlaps AS n FROM \`${(store as unknown as { database: string }).database}\`.jobs WHERE name = ?`, [name]);
    expect(parked?.n).toBe(0);
  });

  it('applies the minimum interval and pausing', async () => {
    const { store, job } = await freshStore();
    const name = job('every');
    const first = await admitted(store, newRun(name), { minIntervalMs: 3_600_000 });
    await store.finishRun(first, outcome(), true);
    const early = await store.admit(newRun(name), { ...RULES, minIntervalMs: 3_600_000 });
    expect(early).toMatchObject({ admitted: false, reason: 'interval' });
    expect(await store.admit(newRun(name), { ...RULES, minIntervalMs: 3_600_000, manual: true })).toMatchObject({ admitted: true });
    const later = new Date(Date.now() + 3_600_000);
    await store.setPaused(name, { reason: 'maintenance', since: '2026-12-01T10:00:00.000Z', by: 'ops' }, 'ops@test', new Date().toISOString());
    expect(await store.admit(newRun(name, { startedAt: later }), RULES)).toEqual({
      admitted: false, reason: 'disabled', paused: { reason: 'maintenance', since: '2026-12-01T10:00:00.000Z', by: 'ops', until: null, fleet: false },
    });
    expect((await store.jobStatus(name))[0]).toMatchObject({ state: 'disabled', disabled_reason: 'maintenance', disabled_by: 'ops' });
    await store.setPaused(name, null, 'ops@test', new Date().toISOString());
    expect(await store.admit(newRun(name, { startedAt: later }), RULES)).toMatchObject({ admitted: true });
  });

  it('abandons a running row whose wrapper is gone, and counts it', async () => {
    const { store, job } = await freshStore();
    const name = job('gone');
    const stale = await admitted(store, newRun(name, { lockBackend: 'none', lockKey: null }));
    const next = await admitted(store, newRun(name, { pid: 5, lockBackend: 'none', lockKey: null }), { isGone: (row) => row.id === stale });
    expect(next).toBeGreaterThan(stale);
    expect(await store.getRun(stale)).toMatchObject({ status: 'abandoned', error: 'wrapper (pid 4242 on host-a) vanished without recording an outcome' });
    expect((await store.jobStatus(name))[0]?.runs_total).toEqual({ abandoned: 1 });
  });
});

describe('mysql run log: migrate --group', () => {
  it('lets a web application\'s account insert requests and read the log, and names a missing one', async () => {
    const { store, database, job } = await freshStore();
    await store.migrate();
    const url = await account([]);
    const user = new URL(url).username;
    await store.allowRequests(`${user}@%`);
    const web = await mysqlStore(database, false, url);
    const id = await web.addRequest({ job: job('web'), args: ['a'], notBefore: new Date(), requestedBy: 'php' });
    expect(await web.cancelRequest(id)).toEqual({ cancelled: true });
    expect(await web.listRuns({ limit: 1 })).toEqual([]);
    // A missing account is named, never made (MariaDB's GRANT would make it, without a password).
    await expect(store.allowRequests(`nobody_${user}`)).rejects.toMatchObject({ exitCode: 64 });
    expect(await mysqlQuery('SELECT user FROM mysql.user WHERE user = ?', [`nobody_${user}`])).toEqual([]);
  });
});

describe('mysql run log: its server and session', () => {
  it('names the server for the spool, and tells a lost connection from a closed one', async () => {
    const { store } = await freshStore();
    const heard: string[] = [];
    store.onIdentity = (identity) => heard.push(identity);
    const identity = await store.serverIdentity();
    // MySQL: its @@server_uuid; MariaDB has none: its host name and server_id.
    expect(identity).toMatch(/^(mariadb:.+:\d+|[0-9a-f-]{36})$/);
    expect(await store.serverIdentity()).toBe(identity);
    expect(heard).toEqual([identity]);
    expect(store.connectionLost).toBe(false);
    await mysqlQuery(`KILL ${store.session.connectionId}`);
    await expect(store.getRun(1)).rejects.toThrow();
    expect(store.connectionLost).toBe(true);
  });
});
