import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { processStart } from '../../src/util/process-id.js';
import { cronguard, fixture, lines, start, waitFor } from '../helpers.js';
import { mysqlClient } from '../mysql-helpers.js';
import { sql } from '../pg-helpers.js';
import { STORES, type StoreBox, storeBox } from '../stores.js';

// Claims whose run ended without its last attempt: the wrapper died between two attempts,
// so no attempt row is `running` and nothing marked the run abandoned.
describe.each(STORES)('requests of a run that ended without its last attempt (%s)', (kind) => {
  it('SIGKILL during --retry-delay: the next invocation fails the request with why, and request --wait ends', async () => {
    const box = storeBox(kind);
    const job = box.job('killed');
    const log = box.path('attempts');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const waiter = start(['request', job, '--wait'], box.env);
    onTestFinished(() => void waiter.child.kill());
    await waitFor(async () => (await box.requests()).length === 1, 'the request');
    const run = start(['-n', job, '--retries', '3', '--retry-delay', '1h', '--', fixture('flaky.sh'), log, '99', '3'], box.env);
    let said = '';
    run.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => said.includes('retrying in 1h00m'), 'the first attempt to fail');
    run.child.kill('SIGKILL');
    await run.done;
    expect(await box.requests()).toEqual([expect.objectContaining({ status: 'running' })]);

    // Any later invocation that holds the lock settles it, even one that then finds nothing
    // to do (--on-request). -w: the killed wrapper's lock goes with its process.
    expect(await cronguard(['-n', job, '-w', '1m', '--on-request', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    const [request] = await box.requests();
    expect(request).toMatchObject({ status: 'failed', exit_code: 3, run_id: (await box.runs())[0]?.id });
    expect(request?.error).toMatch(/^run \d+ ended without its last attempt: its wrapper vanished/);
    const waited = await waiter.done;
    expect(waited.code).toBe(3);
    expect(waited.stderr).toMatch(/request \d+ failed by run \d+ .*exit 3\n$/);
    expect(lines(log)).toHaveLength(1);
  });

  it('a run that ended before starting its command for them: the next run under its lock serves them', async () => {
    const box = storeBox(kind);
    const job = box.job('unstarted');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const id = await box.request(job, ['again']);
    // As a wrapper that vanished leaves it: its run finished without a child pid (the command
    // never started), its claim still `running`; it held the lock this job takes.
    await leftBehind(box, job, id, await jobLock(box, job));
    const ran = box.path('ran');
    const result = await cronguard(['-n', job, '--on-request', '--', 'sh', '-c', 'echo "[$*]" >> "$0"', ran], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual(['[again]']);
    const runs = await box.runs();
    expect(runs.map((r) => [r.status, r.trigger])).toEqual([['failed', 'cron'], ['succeeded', 'request']]);
    expect(await box.requests()).toEqual([expect.objectContaining({ id, status: 'succeeded', attempts: 1, run_id: runs[1]?.id })]);
  });

  it('under another lock, by a wrapper that is gone: settled too, and served once', async () => {
    const box = storeBox(kind);
    const job = box.job('nolock');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const id = await box.request(job, ['again']);
    await leftBehind(box, job, id, NO_LOCK, { pid: process.pid, wrapperStart: 'another-boot/1' });
    const ran = box.path('ran');
    const args = ['-n', job, '--on-request', '--', 'sh', '-c', 'echo "[$*]" >> "$0"', ran];
    // SQLite settles it in the admission that claims it; PostgreSQL, whose wrapper check is
    // made here after its one statement, for the next run.
    for (let n = 0; n < 2; n++) expect(await cronguard(args, box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual(['[again]']);
    expect(await box.requests()).toEqual([expect.objectContaining({ id, status: 'succeeded', attempts: 1 })]);
  });

  it('a claim of a run whose wrapper still lives stays running', async () => {
    const box = storeBox(kind);
    const job = box.job('alive');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const id = await box.request(job);
    // This test process stands for a wrapper waiting to retry, under no lock.
    const runId = await leftBehind(box, job, id, NO_LOCK, { pid: process.pid, wrapperStart: processStart(process.pid) });
    for (let n = 0; n < 2; n++) expect((await cronguard(['-n', job, '--on-request', '--', 'true'], box.env)).code).toBe(0);
    expect(await box.requests()).toEqual([expect.objectContaining({ id, status: 'running', run_id: runId })]);
  });
});

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

interface HeldLock {
  readonly backend: string;
  readonly key: string | null;
}
const NO_LOCK: HeldLock = { backend: 'none', key: null };

// The lock a plain run of the job takes: flock in the sandbox's lock dir, PostgreSQL's
// advisory key for the job in its schema (as docs/fleet-postgres.md computes it), or MySQL's GET_LOCK name.
async function jobLock(box: StoreBox, job: string): Promise<HeldLock> {
  if (box.kind === 'sqlite') return { backend: 'flock', key: join(box.lockDir, `${job}.lock`) };
  if (box.kind === 'mysql') return { backend: 'mysql', key: mysqlLockName(schemaOf(box), job) };
  const [row] = await sql<{ key: string }>(
    `SELECT ('x' || left(encode(sha256(convert_to('cronguard:' || $1 || ':' || $2, 'UTF8')), 'hex'), 16))::bit(64)::bigint::text AS key`,
    [schemaOf(box), job],
  );
  return { backend: 'postgres', key: row?.key ?? null };
}

// A run of this host that finished (failed) without starting its command, under `lock`, by a
// wrapper that is gone unless `wrapper` says otherwise, with request `id` still claimed by
// it; returns the run's id.
async function leftBehind(box: StoreBox, job: string, id: number, lock: HeldLock, wrapper = { pid: 999_999, wrapperStart: 'another-boot/1' as string | null }): Promise<number> {
  const values = [job, hostname(), wrapper.pid, wrapper.wrapperStart, lock.backend, lock.key, `left-${Math.random()}`];
  const columns = 'job, status, trigger, attempt, host, pid, command, started_at, finished_at, exit_code, wrapper_start, lock_backend, lock_key, run_key';
  if (box.kind === 'mysql') {
    const D = `\`${schemaOf(box)}\``;
    const client = await mysqlClient();
    try {
      const [done] = await client.query(
        `INSERT INTO ${D}.runs (${columns.replace('trigger', '`trigger`')}) VALUES (?, 'failed', 'cron', 1, ?, ?, 'old', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 1, ?, ?, ?, ?)`,
        values,
      );
      const runId = (done as { insertId: number }).insertId;
      await client.query(`UPDATE ${D}.requests SET status = 'running', attempts = 1, claimed_at = UTC_TIMESTAMP(6), run_id = ? WHERE id = ?`, [runId, id]);
      return runId;
    } finally {
      await client.end();
    }
  }
  if (box.kind === 'postgres') {
    const s = schemaOf(box);
    const [row] = await sql<{ id: string }>(
      `INSERT INTO "${s}".runs (${columns}) VALUES ($1, 'failed', 'cron', 1, $2, $3, 'old', now(), now(), 1, $4, $5, $6, $7) RETURNING id`,
      values,
    );
    await sql(`UPDATE "${s}".requests SET status = 'running', attempts = 1, claimed_at = now(), run_id = $2 WHERE id = $1`, [id, row?.id]);
    return Number(row?.id);
  }
  const db = new Database(join(box.stateDir, 'cronguard.db'));
  try {
    const runId = Number(
      db
        .prepare(`INSERT INTO runs (${columns}) VALUES (?, 'failed', 'cron', 1, ?, ?, 'old', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z', 1, ?, ?, ?, ?)`)
        .run(...values).lastInsertRowid,
    );
    db.prepare(`UPDATE requests SET status = 'running', attempts = 1, claimed_at = '2026-01-01T00:00:00.000Z', run_id = ? WHERE id = ?`).run(runId, id);
    return runId;
  } finally {
    db.close();
  }
}

// The schema (PostgreSQL) or database (MySQL) of the shared log.
function schemaOf(box: StoreBox): string {
  return box.env.CRONGUARD_SCHEMA as string;
}
