import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { databaseUrl, holdingClient, pgRuns, pgSandbox } from '../pg-helpers.js';

// The test server's URL taken apart into libpq's variables.
function libpqEnv(): Record<string, string> {
  const u = new URL(databaseUrl());
  return { PGHOST: u.hostname, PGPORT: u.port || '5432', PGUSER: decodeURIComponent(u.username), PGDATABASE: u.pathname.slice(1) };
}
const password = () => decodeURIComponent(new URL(databaseUrl()).password);

describe('connecting as libpq would', () => {
  it('CRONGUARD_DATABASE_URL=postgres:// takes everything else from PG*', async () => {
    const box = pgSandbox();
    const job = box.job('libpq');
    const env = { ...box.env, ...libpqEnv(), PGPASSWORD: password(), CRONGUARD_DATABASE_URL: 'postgres://' };
    const result = await cronguard(['-n', job, '--', 'true'], env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(await pgRuns(box.schema)).toEqual([expect.objectContaining({ job, status: 'succeeded', lock_backend: 'postgres' })]);
  });

  it.each([
    ['~/.pgpass', (file: string) => ({ HOME: file.replace(/\/\.pgpass$/, '') }), '.pgpass'],
    ['$PGPASSFILE', (file: string) => ({ PGPASSFILE: file }), 'elsewhere'],
  ])('finds the password in %s, so none need be in the crontab (or in ps)', async (_what, pointAt, name) => {
    const box = pgSandbox();
    const job = box.job('pgpass');
    const file = box.path(name);
    const { PGHOST, PGPORT, PGDATABASE, PGUSER } = libpqEnv();
    writeFileSync(file, `${PGHOST}:${PGPORT}:${PGDATABASE}:${PGUSER}:${password()}\n`, { mode: 0o600 });
    const env = { ...box.env, ...pointAt(file), CRONGUARD_DATABASE_URL: `postgres://${PGUSER}@${PGHOST}:${PGPORT}/${PGDATABASE}` };
    const result = await cronguard(['-n', job, '--', 'true'], env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(await pgRuns(box.schema)).toHaveLength(1);
  });

  it('sslmode=prefer falls back to a plain connection on a server without TLS, and prints nothing about it', async () => {
    const box = pgSandbox();
    const job = box.job('prefer');
    const url = new URL(databaseUrl());
    url.searchParams.set('sslmode', 'prefer');
    const result = await cronguard(['-n', job, '--', 'true'], { ...box.env, CRONGUARD_DATABASE_URL: url.toString() });
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(await pgRuns(box.schema)).toHaveLength(1);
  });

  it('sslmode=require fails with 69 on a server without TLS, without echoing the URL', async () => {
    const box = pgSandbox();
    const url = new URL(databaseUrl());
    url.searchParams.set('sslmode', 'require');
    const result = await cronguard(['-n', box.job('require'), '--', 'true'], { ...box.env, CRONGUARD_DATABASE_URL: url.toString() });
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/^cronguard: PostgreSQL at \S+: The server does not support SSL connections\n$/);
  });

  it('parses timestamps whatever DateStyle the server or PGOPTIONS set', async () => {
    const box = pgSandbox();
    const job = box.job('datestyle');
    const env = { ...box.env, PGOPTIONS: '-c datestyle=German' };
    expect(await cronguard(['-n', job, '--', 'true'], env)).toMatchObject({ code: 0, stderr: '' });
    const history = await cronguard(['history', '--json'], env);
    expect(history.code).toBe(0);
    expect(JSON.parse(history.stdout)[0].started_at).toMatch(/^\d{4}-\d\d-\d\dT.*Z$/);
  });

  it.each([
    ['missing', (box: ReturnType<typeof pgSandbox>) => box.path('none.crt'), /sslcert: cannot read \S+none\.crt \(it does not exist\)/],
    ['a directory', (box: ReturnType<typeof pgSandbox>) => box.dir, /sslcert: \S+ is not a regular file/],
    ['a FIFO', (box: ReturnType<typeof pgSandbox>) => {
      spawnSync('mkfifo', [box.path('cert.fifo')]);
      return box.path('cert.fifo');
    }, /sslcert: \S+cert\.fifo is not a regular file/],
  ])('a client certificate that is %s: 64, no hang', async (_what, path, message) => {
    const box = pgSandbox();
    const url = new URL(databaseUrl());
    url.searchParams.set('sslmode', 'require');
    url.searchParams.set('sslcert', path(box));
    const result = await cronguard(['-n', box.job('tls'), '--', 'true'], { ...box.env, CRONGUARD_DATABASE_URL: url.toString() });
    expect(result.code).toBe(64);
    expect(result.stderr).toMatch(message);
  });

  it('a run log locked by maintenance: the server cancels the statement, the job runs, and its run is recorded once', async () => {
    const box = pgSandbox();
    const job = box.job('locked');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    const maintenance = await holdingClient();
    await maintenance.query('BEGIN');
    await maintenance.query(`LOCK TABLE "${box.schema}".runs IN ACCESS EXCLUSIVE MODE`);
    const blocked = await cronguard(['-n', job, '--', 'echo', 'ran'], box.env);
    await maintenance.query('COMMIT');
    await maintenance.end();
    expect(blocked).toMatchObject({ code: 0, stdout: 'ran\n' });
    expect(blocked.stderr).toMatch(/run log .* unavailable \(record the start: .*lock timeout.*\); records go to/);
    expect(await cronguard(['-n', job, '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(rows.filter((r) => r.output === 'ran\n')).toHaveLength(1);
  });
});
