import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterName, freePort } from '../free-port.js';
import { cronguard, fixture, lines, type Sandbox, sandbox, start, waitFor } from '../helpers.js';
import { serve } from '../serve/serve-helpers.js';

// A private cluster whose log this test reads (its name and port are this test's alone):
// DBAs alert on ERROR, WARNING and FATAL lines, so a healthy fleet must leave none there.
const CLUSTER = clusterName('cg_i18_log');
let PORT = 0;
const LOG = `/var/log/postgresql/postgresql-15-${CLUSTER}.log`;
const hasCluster = spawnSync('which', ['pg_createcluster']).status === 0;
const url = (user = 'postgres', db = 'test') => `postgres://${user}@127.0.0.1:${PORT}/${db}`;

async function admin(statements: string[], db = 'test'): Promise<void> {
  const client = new pg.Client({ connectionString: url('postgres', db) });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}

function dropCluster(): void {
  spawnSync('pg_dropcluster', ['--stop', '15', CLUSTER], { stdio: 'ignore' });
}

let logStart = 0;

describe.skipIf(!hasCluster)('the server log stays quiet', () => {
  beforeAll(async () => {
    dropCluster();
    PORT = await freePort();
    execFileSync('pg_createcluster', ['15', CLUSTER, '-p', String(PORT), '--start', '--', '-A', 'trust'], { stdio: 'ignore' });
    // WARNING and up, each with the statement that caused it.
    await admin(["ALTER SYSTEM SET log_min_messages = 'warning'", "ALTER SYSTEM SET log_min_error_statement = 'warning'", 'SELECT pg_reload_conf()', 'CREATE DATABASE test'], 'postgres');
    logStart = statSync(LOG).size;
  }, 120_000);

  afterAll(() => {
    dropCluster();
  });

  const env = (box: Sandbox, user = 'postgres', schema?: string) => ({
    ...box.env,
    CRONGUARD_DATABASE_URL: url(user),
    ...(schema ? { CRONGUARD_SCHEMA: schema } : {}),
  });
  const reads = (e: NodeJS.ProcessEnv) =>
    Promise.all([
      cronguard(['status'], e), cronguard(['history'], e), cronguard(['logs', 'job-1'], e), cronguard(['check', 'job-1', '--max-age', '1d'], e),
      cronguard(['metrics'], e), cronguard(['locks'], e), cronguard(['requests'], e),
    ]);

  it('over first runs racing on a fresh schema, skips, failures, timeouts, a role without DELETE and every subcommand', async () => {
    const box = sandbox();
    const e = env(box);
    // Every reader against a schema that does not exist yet.
    for (const result of await reads(e)) expect(result.code, result.stderr).not.toBe(70);
    const served = await serve([], e);
    await served.get('/');
    await served.get('/api/jobs');

    // Eight hosts (state dirs of their own) running their first jobs at once on a fresh schema.
    const hosts = Array.from({ length: 8 }, () => sandbox());
    const first = await Promise.all(hosts.map((host, i) => cronguard(['-n', `job-${i}`, '--', 'true'], env(host))));
    expect(first.map((r) => r.code)).toEqual(Array(8).fill(0));
    // Healthy runs, a failure, a timeout.
    await Promise.all(hosts.map((host, i) => cronguard(['-n', `job-${i}`, '--', 'true'], env(host))));
    expect((await cronguard(['-n', 'fails', '--', 'false'], e)).code).toBe(1);
    expect((await cronguard(['-n', 'slow', '-t', '200ms', '--', 'sleep', '30'], e)).code).toBe(124);
    // A skip: the lock is held.
    const log = box.path('hold');
    const barrier = box.path('go');
    const held = start(['-n', 'held', '--', fixture('hold.sh'), log, barrier], e);
    await waitFor(() => lines(log).length > 0, 'the held job to start');
    expect((await cronguard(['-n', 'held', '--', 'true'], e)).code).toBe(0);
    writeFileSync(barrier, '');
    expect((await held.done).code).toBe(0);

    // Every subcommand on the schema as it is now.
    for (const result of await reads(e)) expect(result.code, result.stderr).not.toBe(70);
    await served.get('/');
    await served.get('/api/jobs');
    await served.stop();
    expect((await cronguard(['request', 'job-1'], e)).code).toBe(0);
    expect((await cronguard(['disable', 'job-2'], e)).code).toBe(0);
    expect((await cronguard(['enable', 'job-2'], e)).code).toBe(0);
    expect((await cronguard(['migrate'], e)).code).toBe(0);
    expect((await cronguard(['prune', '--older-than', '90d'], e)).code).toBe(0);

    // The docs/fleet-postgres.md's roles, the run role without DELETE: its daily prune, its reads, and a
    // `prune` it may not do (refused without a statement that fails).
    await admin([
      'CREATE ROLE cg_owner LOGIN', 'CREATE SCHEMA cg_roles AUTHORIZATION cg_owner', 'CREATE ROLE cg_run LOGIN',
      'GRANT USAGE ON SCHEMA cg_roles TO cg_run',
      'ALTER DEFAULT PRIVILEGES FOR ROLE cg_owner IN SCHEMA cg_roles GRANT SELECT, INSERT, UPDATE ON TABLES TO cg_run',
      'ALTER DEFAULT PRIVILEGES FOR ROLE cg_owner IN SCHEMA cg_roles GRANT USAGE ON SEQUENCES TO cg_run',
    ]);
    const owner = sandbox();
    expect((await cronguard(['migrate'], env(owner, 'cg_owner', 'cg_roles'))).code).toBe(0);
    const runner = sandbox();
    const r = env(runner, 'cg_run', 'cg_roles');
    const runs = [await cronguard(['-v', '-n', 'job-1', '--', 'true'], r), await cronguard(['-n', 'job-1', '--', 'false'], r)];
    expect(runs.map((x) => x.code)).toEqual([0, 1]);
    expect(runs[0]?.stderr).not.toMatch(/prune.*failed/);
    for (const result of await reads(r)) expect(result.code, result.stderr).not.toBe(70);
    expect((await cronguard(['prune', '--older-than', '90d'], r)).code).toBe(77);
    expect((await cronguard(['migrate'], r)).code).toBe(0);
    // A role that may not create the schema, on a database without one.
    expect((await cronguard(['-n', 'nowhere', '--', 'true'], env(sandbox(), 'cg_run', 'cg_absent'))).code).toBe(0);

    const logged = readFileSync(LOG, 'utf8').slice(logStart).split('\n');
    // LOG level, not alerted on, but worth knowing: a client gone without Terminate.
    const dropped = logged.filter((line) => /could not receive data from client|unexpected EOF/.test(line));
    if (dropped.length > 0) console.log(`connections closed without Terminate:\n${dropped.join('\n')}`);
    const bad = logged.flatMap((line, i) => (/\b(ERROR|WARNING|FATAL|PANIC):/.test(line) ? [line, logged[i + 1] ?? ''] : []));
    expect(bad, bad.join('\n')).toEqual([]);
  }, 180_000);
});
