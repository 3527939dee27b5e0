import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard, start, waitFor } from '../helpers.js';
import { fakeServer } from '../pg-faults.js';
import { databaseUrl, pgSandbox, sql } from '../pg-helpers.js';

const roles: string[] = [];
afterEach(async () => {
  for (const role of roles.splice(0)) await sql(`DROP ROLE IF EXISTS ${role}`);
});

// A role that may hold one connection, and that connection held: to this role, the server
// has no free slot (SQLSTATE 53300), as a fleet's hosts connecting at once may find it.
async function fullServer() {
  const role = `busy_${randomBytes(4).toString('hex')}`;
  roles.push(role);
  await sql(`CREATE ROLE ${role} LOGIN PASSWORD 'pw' CONNECTION LIMIT 1`);
  const url = new URL(databaseUrl());
  url.username = role;
  url.password = 'pw';
  const holder = new pg.Client({ connectionString: url.toString() });
  await holder.connect();
  return { url: url.toString(), release: () => holder.end() };
}

describe('a server with no free connection slot', () => {
  it('is retried, counted with -v, and the job runs once a slot frees', async () => {
    const box = pgSandbox();
    const full = await fullServer();
    const run = start(['-v', '--no-log', '-n', box.job('slot'), '--', 'true'], { ...box.env, CRONGUARD_DATABASE_URL: full.url });
    let said = '';
    run.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => said.includes('PostgreSQL is busy'), 'cronguard to retry');
    await full.release();
    const result = await run.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/: PostgreSQL is busy \(too many connections for role "busy_\w+"\); retry 1 in \d+ms\n/);
  });

  it('gives up after a few seconds with one line and 69', async () => {
    const box = pgSandbox();
    const full = await fullServer();
    const result = await cronguard(['--no-log', '-n', box.job('full'), '--', 'touch', box.path('ran')], { ...box.env, CRONGUARD_DATABASE_URL: full.url });
    await full.release();
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/^cronguard: PostgreSQL at \S+ refused the connection: role busy_\w+ is at its CONNECTION LIMIT: .* \(retried \d+ times\)\n$/);
  });
});

// A signal while cronguard connects to PostgreSQL, or waits to connect again, ends it at
// once: nothing has run, and nothing will.
describe('a signal while connecting', () => {
  it.each([
    ['postgres', 'SIGTERM', 143],
    ['flock', 'SIGINT', 130],
  ] as const)('to a server that never answers (-l %s): %s ends it, one line, 128+N', async (lock, signal, code) => {
    const box = pgSandbox();
    const server = await fakeServer(false);
    const run = start(['-l', lock, '-n', box.job('hung'), '--', 'touch', box.path('ran')], { ...box.env, CRONGUARD_DATABASE_URL: server.url });
    await server.startups(1);
    run.child.kill(signal);
    const result = await run.done;
    expect(result).toMatchObject({ code, stdout: '' });
    expect(result.stderr).toMatch(new RegExp(`^cronguard: \\S+: stopped by ${signal} before the command started; nothing ran\\n$`));
    expect(existsSync(box.path('ran'))).toBe(false);
  });

  it('to a server with no free slot, retried for as long as -w allows: SIGHUP ends it, one line, 129', async () => {
    const box = pgSandbox();
    const server = await fakeServer(true);
    const run = start(['-w', '1h', '-n', box.job('busy'), '--', 'touch', box.path('ran')], { ...box.env, CRONGUARD_DATABASE_URL: server.url });
    await server.startups(2);
    run.child.kill('SIGHUP');
    const result = await run.done;
    expect(result).toMatchObject({ code: 129, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: \S+: stopped by SIGHUP before the command started; nothing ran\n$/);
    expect(existsSync(box.path('ran'))).toBe(false);
  });
});
