import { existsSync, } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migration-files.js';
import { cronguard, fixture, lines, release, sandbox, spooled, start, waitFor } from '../helpers.js';
import { backendOf, databaseUrl, pgRuns, pgSandbox, proxy, sql } from '../pg-helpers.js';

// A URL where no server listens: what a stopped server looks like to a client.
const STOPPED = 'postgres://postgres:pw@127.0.0.1:9/postgres';
const withPassword = (password: string) => {
  const url = new URL(databaseUrl());
  url.password = password;
  return url.toString();
};


describe('postgres run log', () => {
  it('records every column, in its own schema, created on first use', async () => {
    const box = pgSandbox();
    const job = box.job('cols');
    const result = await cronguard(['-n', job, '--', 'sh', '-c', 'echo out; exit 3'], box.env);
    expect(result).toMatchObject({ code: 3, stdout: 'out\n' });
    expect(result.stderr).toMatch(new RegExp(`^cronguard: ${job}: failed with exit 3 after .* \\(run 1; cronguard logs 1\\)\n$`));
    const [row] = await pgRuns(box.schema);
    expect(row).toMatchObject({ job, status: 'failed', exit_code: 3, output: 'out\n', output_truncated: false, trigger: 'cron' });
    expect(row?.started_at).toBeInstanceOf(Date);
    expect(row?.child_pid).toBeGreaterThan(0);
    const [version] = await sql<{ v: number }>(`SELECT max(version) AS v FROM "${box.schema}".schema_migrations`);
    expect(version?.v).toBe(POSTGRES_MIGRATIONS.length);
  });

  it('is migrated once when many migrators start at once', async () => {
    const box = pgSandbox();
    const all = await Promise.all(Array.from({ length: 10 }, () => cronguard(['migrate'], box.env)));
    for (const result of all) expect(result).toMatchObject({ code: 0, stderr: '' });
    const migrations = await sql(`SELECT version FROM "${box.schema}".schema_migrations`);
    expect(migrations).toHaveLength(POSTGRES_MIGRATIONS.length);
  });

  it('serves history and logs', async () => {
    const box = pgSandbox();
    const job = box.job('h');
    await cronguard(['-n', job, '--', 'echo', 'first'], box.env);
    await cronguard(['-n', job, '--', 'echo', 'second'], box.env);
    const history = JSON.parse((await cronguard(['history', job, '--json'], box.env)).stdout);
    expect(history.map((r: { output: string }) => r.output)).toEqual(['second\n', 'first\n']);
    expect(history[0].started_at).toMatch(/Z$/);
    expect(await cronguard(['logs', job], box.env)).toMatchObject({ code: 0, stdout: 'second\n' });
    expect((await cronguard(['logs', String(history[1].id)], box.env)).stdout).toBe('first\n');
  });

  it('keeps a local flock with the shared log (-l flock), and survives its session being killed', async () => {
    const box = pgSandbox();
    const job = box.job('mixed');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const run = start(['-l', 'flock', '-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the command to start');
    // Before the skip: a skipped run's session may linger under the same application_name.
    const backend = await backendOf(job);
    const skipped = await cronguard(['-l', 'flock', '-n', job, '--', 'true'], box.env);
    expect(skipped.code).toBe(0);
    expect((await sql('SELECT pg_terminate_backend($1) AS done', [backend]))[0]?.done).toBe(true);
    release(barrier);
    const result = await run.done;
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const rows = await pgRuns(box.schema);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: 'succeeded', overlaps: 1 });
  });
});

describe('database unavailable', () => {
  it('runs nothing and exits 69 when the postgres lock cannot connect', async () => {
    const box = sandbox();
    const result = await cronguard(['--db', STOPPED, '-n', 'x', '--', 'touch', box.path('ran')], box.env);
    expect(result.code).toBe(69);
    expect(result.stderr).toBe('cronguard: cannot reach PostgreSQL at postgres@127.0.0.1:9/postgres: ECONNREFUSED\n');
    expect(existsSync(box.path('ran'))).toBe(false);
  });

  it('with -l flock runs the job, spools its record, and a later run delivers it', async () => {
    const box = pgSandbox();
    const job = box.job('spool');
    const server = await proxy();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: server.url };
    await server.stop();
    const result = await cronguard(['-l', 'flock', '-n', job, '--', 'sh', '-c', 'echo offline; exit 2'], env);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('offline\n');
    const [warning, summary, ...rest] = result.stderr.trim().split('\n');
    expect(warning).toMatch(/run log postgres@127\.0\.0\.1:\d+\/\w+ .* unavailable .*; records go to .*spool\/\w+ until it can be written$/);
    // Spooled: the run has no id yet to point at.
    expect(summary).toMatch(new RegExp(`^cronguard: ${job}: failed with exit 2 after [0-9.]+m?s$`));
    expect(rest).toEqual([]);
    expect(spooled(box.stateDir)).toHaveLength(1);

    await server.start();
    const later = await cronguard(['-l', 'flock', '-n', job, '--', 'true'], env);
    await server.close();
    expect(later).toMatchObject({ code: 0, stderr: '' });
    expect(spooled(box.stateDir)).toEqual([]);
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => [r.status, r.exit_code, r.output])).toEqual([
      ['failed', 2, 'offline\n'],
      ['succeeded', 0, ''],
    ]);
  });

  it.each([
    ['a URL of no database cronguard knows', ['--db', 'redis://x@y/z'], 64, /--db: expected a URL starting with postgres:\/\/, postgresql:\/\/, mysql:\/\/ or mariadb:\/\//],
    ['an invalid schema', ['--db', 'postgres://x@127.0.0.1/y', '--schema', 'bad-name'], 64, /--schema: 'bad-name' is not a plain identifier/],
    ['a bad --lock-key', ['--db', 'postgres://x@127.0.0.1/y', '--lock-key', '99999999999999999999'], 64, /not a signed 64-bit integer/],
    ['--lock-key without the postgres lock', ['--lock-key', '5'], 64, /--lock-key applies to the postgres lock backend only/],
    ['a bad --on-lock-loss', ['--db', 'postgres://x@127.0.0.1/y', '--on-lock-loss', 'panic'], 64, /--on-lock-loss: 'panic'/],
  ])('rejects %s with 64', async (_what, args, code, message) => {
    const box = sandbox();
    const result = await cronguard([...args, '--', 'touch', box.path('ran')], box.env);
    expect(result.code).toBe(code);
    expect(result.stderr).toMatch(message);
    expect(existsSync(box.path('ran'))).toBe(false);
  });

  it('exits 77 on a wrong password, without printing it', async () => {
    // A sandbox schema: a trust-authenticated server accepts any password, and the job runs.
    const box = pgSandbox();
    const url = withPassword('not-the-password-xyz');
    const result = await cronguard(['--db', url, '-n', box.job('pw'), '--', 'touch', box.path('ran')], box.env);
    if (result.code === 0) return;
    expect(result.code).toBe(77);
    expect(result.stderr).toMatch(/refused the login/);
    expect(result.stderr).not.toContain('not-the-password-xyz');
    expect(existsSync(box.path('ran'))).toBe(false);
  });

  it('exits 69 when the database does not exist', async () => {
    const box = sandbox();
    const url = new URL(databaseUrl());
    url.pathname = '/no_such_database_here';
    const result = await cronguard(['--db', url.toString(), '-n', 'nodb', '--', 'true'], box.env);
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/no_such_database_here/);
    // A server that trusts local connections (the second CI pass) has no password to leak.
    if (url.password !== '') expect(result.stderr).not.toContain(url.password);
  });

  it('subcommands exit 69 when the database is unreachable', async () => {
    const result = await cronguard(['history', '--db', STOPPED], sandbox().env);
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/cannot reach PostgreSQL/);
  });
});
