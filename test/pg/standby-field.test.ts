import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { advisoryKey } from '../../src/store/postgres/lock.js';
import type { RunRow } from '../../src/store/types.js';
import { cronguard, fixture, lines, release, sandbox, spooled, start, waitFor } from '../helpers.js';
import {
  dropPair, makePair, missingTools, PRIMARY, pooler, promoteStandby, query, STANDBY, stopPrimary, urlOf,
} from '../standby-clusters.js';

// A real streaming replica (Debian's pg_createcluster + pg_basebackup -R): cronguard never
// takes a lock or runs a job on a standby, reaches the primary through libpq's multi-host
// forms, and after a failover delivers what it spooled against the old primary to the
// promoted one. The tests run in order: the last one stops the primary and promotes.
const missing = missingTools();
const schema = `t_${randomBytes(6).toString('hex')}`;
const job = (base: string) => `${base}-${schema}`;

function box(url: string) {
  const b = sandbox();
  return { ...b, env: { ...b.env, CRONGUARD_DATABASE_URL: url, CRONGUARD_SCHEMA: schema } };
}

const rows = (port: number, name: string) => query<RunRow & { run_key: string }>(port, `SELECT * FROM "${schema}".runs WHERE job = $1 ORDER BY id`, [name]);

describe.skipIf(missing !== null)(`a streaming standby${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    await makePair();
    const migrated = await cronguard(['migrate'], box(urlOf(PRIMARY.port)).env);
    expect(migrated.code).toBe(0);
  }, 180_000);
  afterAll(() => dropPair(), 120_000);

  it('is refused before any lock is taken: 69, one line naming it, nothing run or spooled', async () => {
    const b = box(urlOf(STANDBY.port));
    const name = job('refused');
    // Held on the standby: a run that tried the lock there would skip (-E 3), not fail.
    const holder = new pg.Client({ host: '127.0.0.1', port: STANDBY.port, user: 'postgres', database: 'test' });
    await holder.connect();
    const { rows: [held] } = await holder.query<{ got: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS got', [advisoryKey(name, schema).toString()]);
    expect(held?.got).toBe(true);
    const result = await cronguard(['-n', name, '-E', '3', '--', 'touch', b.path('ran')], b.env).finally(() => holder.end());
    expect(result).toMatchObject({ code: 69, stdout: '' });
    expect(result.stderr).toBe(
      `cronguard: PostgreSQL at postgres@127.0.0.1:${STANDBY.port}/test is a read-only standby (in recovery): point the URL at the primary, or list the hosts with target_session_attrs=read-write\n`,
    );
    expect(existsSync(b.path('ran'))).toBe(false);
    expect(spooled(b.stateDir)).toEqual([]);
    // With the flock lock the job runs, and its record waits in the spool for the primary.
    const local = await cronguard(['-n', name, '-l', 'flock', '--', 'touch', b.path('ran')], b.env);
    expect(local.code).toBe(0);
    expect(local.stderr).toMatch(/read-only standby .*; records go to /);
    expect(spooled(b.stateDir)).toHaveLength(1);
  });

  it('multi-host, standby first: read-write reaches the primary; any reaches the standby and is refused', async () => {
    const list = `postgres://postgres@127.0.0.1:${STANDBY.port},127.0.0.1:${PRIMARY.port}/test`;
    const name = job('multi');
    const rw = box(`${list}?target_session_attrs=read-write`);
    const ran = await cronguard(['-v', '-n', name, '--', 'true'], rw.env);
    expect(ran.code).toBe(0);
    expect(ran.stderr).toContain(`cronguard: database postgres@127.0.0.1:${STANDBY.port},127.0.0.1:${PRIMARY.port}/test (from $CRONGUARD_DATABASE_URL)`);
    expect(ran.stderr).toContain(`run log postgres@127.0.0.1:${PRIMARY.port}/test (schema ${schema})`);
    expect(ran.stderr).toMatch(new RegExp(`holding postgres advisory lock -?\\d+ on postgres@127.0.0.1:${PRIMARY.port}/test`));
    expect(await rows(PRIMARY.port, name)).toEqual([expect.objectContaining({ status: 'succeeded' })]);

    const any = await cronguard(['-n', name, '--', 'touch', rw.path('ran')], box(list).env);
    expect(any.code).toBe(69);
    expect(any.stderr).toMatch(new RegExp(`^cronguard: PostgreSQL at postgres@127.0.0.1:${STANDBY.port}/test is a read-only standby`));
    expect(existsSync(rw.path('ran'))).toBe(false);

    // A host that cannot be reached is passed over too; when none will do, one line says
    // why for each.
    const closed = `postgres://postgres@127.0.0.1:1,127.0.0.1:${STANDBY.port}`;
    expect((await cronguard(['-n', name, '--', 'true'], box(`${closed},127.0.0.1:${PRIMARY.port}/test?target_session_attrs=primary`).env)).code).toBe(0);
    expect(await rows(PRIMARY.port, name)).toHaveLength(2);
    const none = await cronguard(['-n', name, '--', 'true'], box(`${closed}/test?target_session_attrs=read-write`).env);
    expect(none).toMatchObject({ code: 69, stdout: '' });
    expect(none.stderr).toBe(
      `cronguard: cannot reach PostgreSQL at postgres@127.0.0.1:1/test: ECONNREFUSED (also tried postgres@127.0.0.1:${STANDBY.port}/test: a read-only standby (in recovery))\n`,
    );

    const standby = await cronguard(['-n', name, '--', 'true'], box(`${list}?target_session_attrs=standby`).env);
    expect(standby.code).toBe(64);
    expect(standby.stderr).toMatch(/target_session_attrs=standby asks for a standby, but a run locks and records on the primary/);

    // A reading subcommand may read from the standby, once its replay has the row.
    await waitFor(async () => (await rows(STANDBY.port, name)).length === 2, 'the rows to reach the standby');
    const history = await cronguard(['history', name, '--json'], box(`${list}?target_session_attrs=standby`).env);
    expect(history.code).toBe(0);
    expect(JSON.parse(history.stdout)).toEqual([expect.objectContaining({ job: name, status: 'succeeded' }), expect.objectContaining({ job: name })]);
    // A writing one says where it landed.
    const disable = await cronguard(['disable', name], box(`${list}?target_session_attrs=prefer-standby`).env);
    expect(disable.code).toBe(69);
    expect(disable.stderr).toMatch(/read-only \(a standby\?\).*target_session_attrs=read-write/);
  });

  it('takes a keyword/value string, quoted password and all', async () => {
    const b = box(`host=127.0.0.1,127.0.0.1 port=${STANDBY.port},${PRIMARY.port} dbname=test user=postgres password='not used\\'here' target_session_attrs=primary`);
    const name = job('kv');
    const result = await cronguard(['-n', name, '--', 'true'], b.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(await rows(PRIMARY.port, name)).toEqual([expect.objectContaining({ status: 'succeeded' })]);
  });

  it('failover: the outcome spooled against the old primary is delivered to the promoted standby, and replaces its abandoned verdict', async () => {
    const pool = await pooler(PRIMARY.port);
    try {
      const name = job('failover');
      const a = box(urlOf(pool.port));
      const log = a.path('log');
      const barrier = a.path('barrier');
      const held = start(['-n', name, '--on-lock-loss', 'continue', '--', fixture('hold.sh'), log, barrier], a.env);
      await waitFor(() => lines(log).length === 1, 'the job to start');
      await waitFor(async () => (await rows(STANDBY.port, name).catch(() => []))[0]?.status === 'running', 'its row to reach the standby');
      const [first] = await rows(STANDBY.port, name);

      // The primary goes away; its pooler accepts logins and answers nothing.
      pool.serverGone();
      stopPrimary();
      const since = Date.now();
      release(barrier);
      const result = await held.done;
      const gaveUpMs = Date.now() - since;
      console.log(`outcome write after the lost session gave up and spooled in ${gaveUpMs} ms`);
      expect(result.code).toBe(0);
      expect(result.stderr).toMatch(/records go to .*\/spool\/id-[0-9a-f]{8} until it can be written/);
      // A statement may take 30 s; a record after a lost session gives up within seconds.
      expect(gaveUpMs).toBeLessThan(20_000);
      const spool = join(a.stateDir, 'spool');
      expect(readdirSync(spool).filter((d) => d.startsWith('id-') && readdirSync(join(spool, d)).some((f) => f.endsWith('.json')))).toHaveLength(1);

      await promoteStandby();
      // Another host runs the job on the new primary first: it holds the lock, so the old
      // run's row is marked abandoned.
      const other = box(urlOf(STANDBY.port));
      expect((await cronguard(['-n', name, '--', 'true'], other.env)).code).toBe(0);
      expect((await rows(STANDBY.port, name))[0]).toMatchObject({ id: first?.id, status: 'abandoned' });

      // This host's next invocation, pointed at the new primary, delivers its record: the
      // true outcome wins, on the same row, once.
      const next = await cronguard(['-n', name, '--', 'true'], { ...a.env, CRONGUARD_DATABASE_URL: urlOf(STANDBY.port) });
      expect(next).toMatchObject({ code: 0, stderr: '' });
      expect(spooled(a.stateDir)).toEqual([]);
      const after = await rows(STANDBY.port, name);
      expect(after).toHaveLength(3);
      expect(after[0]).toMatchObject({ id: first?.id, run_key: first?.run_key, status: 'succeeded', exit_code: 0 });
      expect(after[0]?.error).toMatch(/^lock lost while running .*; the command was allowed to continue$/);
      expect(after.filter((r) => r.run_key === first?.run_key)).toHaveLength(1);
    } finally {
      await pool.close();
    }
  });
});
