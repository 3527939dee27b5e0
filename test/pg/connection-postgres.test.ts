import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { databaseUrl, pgRuns, pgSandbox } from '../pg-helpers.js';

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
});
