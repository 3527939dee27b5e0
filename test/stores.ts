import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { resolveDatabase } from '../src/store/database-config.js';
import { dialectOf } from '../src/store/dialects.js';
import { connectPostgres, openPostgresStore, openSqliteStore, type RunStore } from '../src/store/index.js';
import { resolveDb } from '../src/store/postgres/config.js';
import type { RequestRow } from '../src/store/requests.js';
import type { RunRow } from '../src/store/types.js';
import { runs, type Sandbox, sandbox } from './helpers.js';
import { mysqlClient, mysqlQuery, mysqlSandbox, mysqlUrl } from './mysql-helpers.js';
import { databaseUrl, pgRuns, pgSandbox, sql } from './pg-helpers.js';

// The tests of features every store has run against each: the embedded SQLite log and a
// shared PostgreSQL or MySQL/MariaDB one.
export const STORES = ['sqlite', 'postgres', 'mysql'] as const;
export type StoreKind = (typeof STORES)[number];

export interface StoreBox extends Sandbox {
  readonly kind: StoreKind;
  // A job name of this test's own (advisory locks are shared by the whole server).
  job(base: string): string;
  runs(): Promise<RunRow[]>;
  requests(): Promise<RequestRow[]>;
  // A request made as a web application makes it: the documented statement, in SQL.
  request(job: string, args?: string[]): Promise<number>;
  // Deletes a request, as a hand or a prune would.
  forgetRequest(id: number): Promise<void>;
  // Empties a run's child_pid: the log as a wrapper SIGKILLed before recording it leaves it.
  forgetChildPid(id: number): Promise<void>;
  // Finished runs written straight into the log (after `cronguard migrate`), for tests that
  // need known durations, statuses and ages.
  insertRuns(rows: readonly SeedRun[]): Promise<void>;
  // A job's schedule set as docs/fleet-mysql.md tells a web application to (null clears it).
  setSchedule(job: string, spec: string | null): Promise<void>;
}

export interface SeedRun {
  readonly job: string;
  readonly status: string;
  readonly startedAt: Date;
  readonly durationMs: number | null;
  readonly exitCode?: number | null;
  readonly host?: string;
}

let seeded = 0;
const seedValues = (r: SeedRun) => [
  r.job, r.status, r.host ?? 'seed-host', r.startedAt.toISOString(), r.durationMs === null ? null : new Date(r.startedAt.getTime() + r.durationMs).toISOString(),
  r.durationMs, r.exitCode ?? (r.status === 'succeeded' ? 0 : r.status === 'failed' ? 1 : null), `seed-${process.pid}-${++seeded}`,
];
const SEED_COLUMNS = "job, status, trigger, attempt, host, pid, command, started_at, finished_at, duration_ms, exit_code, run_key";

const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;

export function storeBox(kind: StoreKind): StoreBox {
  if (kind === 'sqlite') {
    const box = sandbox();
    const db = () => new Database(join(box.stateDir, 'cronguard.db'));
    return {
      ...box,
      kind,
      job: (base) => base,
      runs: async () => runs(box.stateDir),
      requests: async () => {
        const d = db();
        try {
          return (d.prepare('SELECT * FROM requests ORDER BY id').all() as (RequestRow & { args: string })[]).map((r) => ({ ...r, args: JSON.parse(r.args) }));
        } finally {
          d.close();
        }
      },
      insertRuns: async (rows) => {
        const d = db();
        try {
          const insert = d.prepare(`INSERT INTO runs (${SEED_COLUMNS}) VALUES (?, ?, 'cron', 1, ?, 1, 'seed', ?, ?, ?, ?, ?)`);
          d.transaction(() => {
            for (const r of rows) insert.run(...seedValues(r));
          })();
        } finally {
          d.close();
        }
      },
      forgetRequest: async (id) => {
        const d = db();
        try {
          d.prepare('DELETE FROM requests WHERE id = ?').run(id);
        } finally {
          d.close();
        }
      },
      forgetChildPid: async (id) => {
        const d = db();
        try {
          d.prepare('UPDATE runs SET child_pid = NULL WHERE id = ?').run(id);
        } finally {
          d.close();
        }
      },
      request: async (job, args = []) => {
        const d = db();
        try {
          return (d.prepare('INSERT INTO requests (job, args) VALUES (?, ?) RETURNING id').get(job, JSON.stringify(args)) as { id: number }).id;
        } finally {
          d.close();
        }
      },
      setSchedule: async (job, spec) => {
        const d = db();
        try {
          d.prepare('INSERT INTO jobs (name, schedule) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET schedule = excluded.schedule').run(job, spec);
        } finally {
          d.close();
        }
      },
    };
  }
  if (kind === 'mysql') return mysqlStoreBox();
  const box = pgSandbox();
  return {
    ...box,
    kind,
    runs: async () => (await pgRuns(box.schema)).map(asJson),
    requests: async () => (await sql<RequestRow>(`SELECT * FROM "${box.schema}".requests ORDER BY id`)).map(asJson),
    insertRuns: async (rows) => {
      for (const r of rows) {
        await sql(`INSERT INTO "${box.schema}".runs (${SEED_COLUMNS}) VALUES ($1, $2, 'cron', 1, $3, 1, 'seed', $4, $5, $6, $7, $8)`, seedValues(r));
      }
    },
    forgetRequest: async (id) => {
      await sql(`DELETE FROM "${box.schema}".requests WHERE id = $1`, [id]);
    },
    forgetChildPid: async (id) => {
      await sql(`UPDATE "${box.schema}".runs SET child_pid = NULL WHERE id = $1`, [id]);
    },
    request: async (job, args = []) => Number((await sql<{ id: string }>(`SELECT "${box.schema}".request($1, $2) AS id`, [job, args]))[0]?.id),
    setSchedule: async (job, spec) => {
      await sql(`SELECT "${box.schema}".set_schedule($1, $2)`, [job, spec]);
    },
  };
}

// MySQL's log in a throwaway database, written as docs/fleet-mysql.md tells a web application to.
function mysqlStoreBox(): StoreBox & { readonly database: string } {
  const box = mysqlSandbox();
  const D = `\`${box.database}\``;
  // A row as the CLI's --json shows it: booleans, and args as the array its JSON text holds.
  const row = (r: Record<string, unknown>) => ({
    ...asJson(r),
    ...('output_truncated' in r ? { output_truncated: Boolean(r.output_truncated) } : {}),
    ...(typeof r.args === 'string' ? { args: JSON.parse(r.args) } : {}),
  });
  return {
    ...box,
    kind: 'mysql',
    runs: async () => (await mysqlQuery<Record<string, unknown>>(`SELECT * FROM ${D}.runs ORDER BY id`)).map(row) as unknown as RunRow[],
    requests: async () => (await mysqlQuery<Record<string, unknown>>(`SELECT * FROM ${D}.requests ORDER BY id`)).map(row) as unknown as RequestRow[],
    insertRuns: async (rows) => {
      for (const r of rows) {
        const [job, status, host, startedAt, finishedAt, ...rest] = seedValues(r);
        const times = [new Date(startedAt as string), finishedAt === null ? null : new Date(finishedAt as string)];
        await mysqlQuery(`INSERT INTO ${D}.runs (${SEED_COLUMNS.replace('trigger', '`trigger`')}) VALUES (?, ?, 'cron', 1, ?, 1, 'seed', ?, ?, ?, ?, ?)`, [job, status, host, ...times, ...rest]);
        // What a run's admission would have made: its job's row (status lists the jobs in it).
        await mysqlQuery(`INSERT IGNORE INTO ${D}.jobs (name) VALUES (?)`, [job]);
      }
    },
    forgetRequest: async (id) => {
      await mysqlQuery(`DELETE FROM ${D}.requests WHERE id = ?`, [id]);
    },
    forgetChildPid: async (id) => {
      await mysqlQuery(`UPDATE ${D}.runs SET child_pid = NULL WHERE id = ?`, [id]);
    },
    setSchedule: async (job, spec) => {
      await mysqlQuery(`INSERT IGNORE INTO ${D}.jobs (name) VALUES (?)`, [job]);
      await mysqlQuery(`UPDATE ${D}.jobs SET schedule = ? WHERE name = ?`, [spec, job]);
    },
    // As docs/fleet-mysql.md tells a web application: InnoDB may pick the INSERT as a deadlock's
    // victim (1213) while an admission claims the job's requests; nothing was inserted, so
    // it is sent again (seen once in CI).
    request: async (job, args = []) => {
      const client = await mysqlClient();
      try {
        for (;;) {
          try {
            const [done] = await client.query(`INSERT INTO ${D}.requests (job, args) VALUES (?, ?)`, [job, JSON.stringify(args)]);
            return (done as { insertId: number }).insertId;
          } catch (error) {
            if ((error as { errno?: number }).errno !== 1213) throw error;
          }
        }
      } finally {
        await client.end();
      }
    },
  };
}

// A PostgreSQL row as the CLI's --json shows it: bigints as numbers, times as ISO text.
function asJson<T extends object>(row: T): T {
  return Object.fromEntries(
    Object.entries(row).map(([key, value]) => [
      key,
      value instanceof Date ? value.toISOString() : (key === 'id' || key.endsWith('_id')) && typeof value === 'string' ? Number(value) : value,
    ]),
  ) as T;
}

// The box's run log opened directly, as the CLI opens it (not migrated).
export async function openStore(kind: StoreKind, box: StoreBox): Promise<RunStore> {
  if (kind === 'sqlite') return openSqliteStore(box.stateDir);
  const schema = box.env.CRONGUARD_SCHEMA as string;
  if (kind === 'mysql') {
    const db = resolveDatabase({ value: mysqlUrl(), from: 'test' }, { value: schema, from: 'test' }, {});
    const found = db as NonNullable<typeof db>;
    return dialectOf(found).open(found, 'test', true);
  }
  const db = resolveDb({ value: databaseUrl(), from: 'test' }, { value: schema, from: 'test' }, {}) as NonNullable<ReturnType<typeof resolveDb>>;
  return openPostgresStore(await connectPostgres(db, 'test'), schema);
}
