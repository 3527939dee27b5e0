// The scale bench (part of `npm run bench`, bundled and run by bench.mjs): a run log of
// 1,000,000 runs of 1,000 jobs in each store, then the median time of what people ask of it
// (status, history, check) and of the run path's own statements, which must not grow with
// the log; the query plans, to show they use indexes; and runs started while a prune
// deletes most of the log, which must not be held up.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import type { AdmitOptions } from '../../src/store/admission.js';
import { connectPostgres, openPostgresStore } from '../../src/store/index.js';
import { resolveDb } from '../../src/store/postgres/config.js';
import { listRunsStatement, statements } from '../../src/store/postgres/sql.js';
import type { PostgresStore } from '../../src/store/postgres/store.js';
import type { RunStore } from '../../src/store/run-store.js';
import { listRunsSql, SQL } from '../../src/store/sqlite/sql.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { NewRun } from '../../src/store/types.js';
import { serveBench } from './serve-bench.js';

const ROWS = Number(process.env.BENCH_SCALE_ROWS ?? 1_000_000);
const JOBS = 1000;
const SAMPLES = 15;
const HOUR = 3_600_000;
const [work, launcher, databaseUrl, schema] = process.argv.slice(2) as [string, string, string | undefined, string | undefined];
const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
// `prepare`: before each sample, outside its time.
async function time(fn: () => unknown, prepare?: () => Promise<void>): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    await prepare?.();
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  return median(samples);
}

let keys = 0;
const newRun = (job: string): NewRun => {
  const now = new Date(Date.now() + ++keys * 10);
  return {
    job, trigger: 'cron', attempt: 1, host: 'bench', pid: process.pid, username: 'bench', command: 'true', startedAt: now, invokedAt: now,
    tick: new Date(Math.floor(Date.now() / 60_000) * 60_000), lockBackend: 'flock', lockKey: '/bench', slot: 0, maxRunning: 1, runKey: `bench-${process.pid}-${keys}`, wrapperStart: null,
  };
};
const OPTIONS: AdmitOptions = { oneRunPerTick: true, isGone: () => false, minIntervalMs: 1, spacingMs: null, onRequest: false, batch: false, batchMax: null, manual: false, keepLock: false, scheduled: null };

// Row i: job i % 1000, an hour apart per job, 1 in 20 failed; the newest rows are now.
const SEED_SQL = `job, status, trigger, attempt, host, pid, command, started_at, finished_at, duration_ms, exit_code, output, run_key`;

async function measure(label: string, store: RunStore): Promise<string[]> {
  const job = 'job-500';
  const rows: [string, number][] = [];
  rows.push(['status (all 1,000 jobs)', await time(() => store.jobStatus(null))]);
  rows.push(['status NAME / check NAME', await time(() => store.jobStatus(job))]);
  rows.push(['history NAME (20 rows)', await time(() => store.listRuns({ jobs: [job], limit: 20 }))]);
  rows.push(['history (20 rows)', await time(() => store.listRuns({ limit: 20 }))]);
  rows.push(['history --since 1h', await time(() => store.listRuns({ since: new Date(Date.now() - HOUR).toISOString(), limit: 20 }))]);
  let id = 0;
  // A store stamps a run's start with its own clock when it gets the lock: each admission
  // waits (untimed) until the clock has moved past the 1 ms --min-interval of the last.
  let admittedAt = 0;
  const nextMillisecond = async () => {
    while (Date.now() <= admittedAt + 2) await new Promise((resolve) => setTimeout(resolve, 1));
  };
  rows.push(['run path: admit (interval, tick, record)', await time(async () => {
    const a = await store.admit(newRun(job), OPTIONS);
    if (!a.admitted) throw new Error(`${label}: not admitted: ${a.reason} (last start ${a.lastStartedAt ?? '?'})`);
    admittedAt = Date.now();
    id = a.runId;
    await store.finishRun(id, { status: 'succeeded', finishedAt: new Date(), durationMs: 1, exitCode: 0, signal: null, output: '', outputTruncated: false, error: null }, true);
  }, nextMillisecond)]);
  rows.push(['run path: child pid', await time(() => store.setChildPid(id, 1, 'true'))]);
  rows.push(['run path: count a skip', await time(() => store.recordOverlap(job, 'bench', 1))]);
  return rows.map(([what, ms]) => `| ${label} | ${what} | ${ms.toFixed(1)} | ${ms < 100 ? '' : 'MISSED (goal < 100 ms)'} |`);
}

async function seedSqlite(dir: string): Promise<void> {
  await (await SqliteStore.open(dir)).close();
  const db = new Database(join(dir, 'cronguard.db'));
  // Triggers off while seeding (their work is done in bulk after), as a restore would.
  const triggers = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'trigger'`).all() as { name: string; sql: string }[];
  for (const t of triggers) db.exec(`DROP TRIGGER ${t.name}`);
  const insert = db.prepare(`INSERT INTO runs (${SEED_SQL}) VALUES (?, ?, 'cron', 1, 'seed', 1, 'true', ?, ?, ?, ?, ?, ?)`);
  const now = Date.now();
  db.transaction(() => {
    for (let i = 0; i < ROWS; i++) {
      const started = now - (ROWS - i) * (HOUR / JOBS);
      const failed = i % 20 === 7;
      insert.run(`job-${i % JOBS}`, failed ? 'failed' : 'succeeded', new Date(started).toISOString(), new Date(started + 1000).toISOString(), 1000 + (i % 997), failed ? 1 : 0, `output of run ${i}\n`, `seed-${i}`);
    }
  })();
  db.exec(`INSERT INTO jobs (name) SELECT DISTINCT job FROM runs WHERE true ON CONFLICT DO NOTHING;
           INSERT INTO run_counts (job, status, n) SELECT job, status, count(*) FROM runs GROUP BY 1, 2;`);
  for (const t of triggers) db.exec(t.sql);
  db.exec('ANALYZE');
  db.close();
}

async function seedPostgres(store: PostgresStore): Promise<void> {
  await store.migrate();
  const s = store.session;
  const S = s.escapeIdentifier(schema as string);
  // Triggers off while seeding (their work is done in bulk after), as a restore would.
  await s.query('SET statement_timeout = 0; SET session_replication_role = replica');
  await s.query(`INSERT INTO ${S}.runs (${SEED_SQL})
    SELECT 'job-' || (i % ${JOBS}), CASE WHEN i % 20 = 7 THEN 'failed' ELSE 'succeeded' END, 'cron', 1, 'seed', 1, 'true',
           now() - (${ROWS} - i) * interval '${HOUR / JOBS} milliseconds', now() - (${ROWS} - i) * interval '${HOUR / JOBS} milliseconds' + interval '1 second',
           1000 + i % 997, CASE WHEN i % 20 = 7 THEN 1 ELSE 0 END, 'output of run ' || i || E'\\n', 'seed-' || i
    FROM generate_series(0, ${ROWS - 1}) i`);
  await s.query('SET session_replication_role = DEFAULT');
  await s.query(`INSERT INTO ${S}.jobs (name) SELECT DISTINCT job FROM ${S}.runs ON CONFLICT DO NOTHING`);
  await s.query(`INSERT INTO ${S}.run_counts (job, status, n) SELECT job, status, count(*) FROM ${S}.runs GROUP BY 1, 2`);
  await s.query(`VACUUM ANALYZE ${S}.runs`);
}

// The plan lines that say how each statement finds its rows.
function sqlitePlans(dir: string): string[] {
  const db = new Database(join(dir, 'cronguard.db'), { readonly: true });
  const plan = (label: string, sql: string, params: Record<string, unknown> | unknown[]) =>
    `${label}: ${(db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as { detail: string }[]).map((r) => r.detail).join('; ')}`;
  const out = [
    plan('status NAME', SQL.jobStatus, { job: 'job-500', now: new Date().toISOString() }),
    plan('history NAME', listRunsSql({ jobs: ['job-500'], limit: 20 }), { jobs: '["job-500"]', limit: 20 }),
    plan('history --since', listRunsSql({ since: 'x', limit: 20 }), { since: new Date().toISOString(), limit: 20 }),
    plan('interval check', SQL.lastStart, ['job-500']),
  ];
  db.close();
  return out;
}

async function postgresPlans(store: PostgresStore): Promise<string[]> {
  const S = store.session.escapeIdentifier(schema as string);
  const sql = statements(S);
  const plan = async (label: string, text: string, values: unknown[]) => {
    const rows = await store.session.query<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) ${text}`, values);
    return `${label}: ${rows.map((r) => r['QUERY PLAN'].trim()).filter((l) => /Scan|Index/.test(l)).join('; ')}`;
  };
  const history = listRunsStatement(S, { jobs: ['job-500'], limit: 20 });
  return [
    await plan('status NAME', sql.jobStatus.text, ['job-500']),
    await plan('history NAME', history.text, [['job-500'], 20]),
    await plan('interval check', `SELECT started_at FROM ${S}.runs WHERE job = $1 AND status <> 'abandoned' ORDER BY id DESC LIMIT 1`, ['job-500']),
  ];
}

// Runs of one job, end to end, before and while `cronguard prune` deletes 99% of the log:
// the prune's short batches must not hold them up.
async function pruneUnderLoad(env: NodeJS.ProcessEnv): Promise<string> {
  const exec = (args: string[]) =>
    new Promise<number>((resolve, reject) => {
      const start = performance.now();
      const child = spawn(launcher, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('exit', (code) => (code === 0 ? resolve(performance.now() - start) : reject(new Error(`${args.join(' ')}: exit ${code}: ${stderr}`))));
    });
  const run = () => exec(['-n', 'job-7', '--every-tick', '--', 'true']);
  const before: number[] = [];
  for (let i = 0; i < 10; i++) before.push(await run());
  let pruning = true;
  const prune = exec(['prune', '--older-than', '10h', '--keep', '10']).finally(() => (pruning = false));
  const during: number[] = [];
  while (pruning) during.push(await run());
  const pruneMs = await prune;
  return `runs of a job: median ${median(before).toFixed(0)} ms; during a ${(pruneMs / 1000).toFixed(1)} s prune of ~99% of the log, ${during.length} runs: median ${median(during).toFixed(0)} ms, slowest ${Math.max(...during).toFixed(0)} ms`;
}

async function main(): Promise<void> {
  const out: string[] = [`\nscale: ${ROWS.toLocaleString('en')} runs of ${JOBS} jobs\n`, '| store | query | median ms | |', '|---|---|---:|---|'];
  const plans: string[] = [];
  const notes: string[] = [];
  const sqliteDir = join(work, 'scale-sqlite');
  let started = performance.now();
  await seedSqlite(sqliteDir);
  notes.push(`sqlite: seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const lite = await SqliteStore.open(sqliteDir);
  out.push(...(await measure('sqlite', lite)));
  await lite.close();
  plans.push(...sqlitePlans(sqliteDir).map((p) => `sqlite ${p}`));
  const sqliteEnv = { ...process.env, CRONGUARD_STATE_DIR: sqliteDir, CRONGUARD_LOCK_DIR: join(work, 'scale-locks') };
  out.push(...(await serveBench('sqlite', launcher, sqliteEnv)));
  notes.push(`sqlite: ${await pruneUnderLoad(sqliteEnv)}`);
  if (databaseUrl && schema) {
    const db = resolveDb({ value: databaseUrl, from: 'bench' }, { value: schema, from: 'bench' }, process.env);
    const store = await openPostgresStore(await connectPostgres(db as NonNullable<typeof db>, 'cronguard-bench'), schema);
    started = performance.now();
    await seedPostgres(store);
    notes.push(`postgres: seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    out.push(...(await measure('postgres', store)));
    plans.push(...(await postgresPlans(store)).map((p) => `postgres ${p}`));
    await store.close();
    const env = { ...process.env, CRONGUARD_DATABASE_URL: databaseUrl, CRONGUARD_SCHEMA: schema, CRONGUARD_STATE_DIR: join(work, 'scale-state'), CRONGUARD_LOCK_DIR: join(work, 'scale-locks') };
    out.push(...(await serveBench('postgres', launcher, env)));
    notes.push(`postgres: ${await pruneUnderLoad(env)}`);
  }
  console.log([...out, '', ...notes, '', 'query plans:', ...plans].join('\n'));
}

main().catch((error: unknown) => {
  console.error(`scale bench: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
