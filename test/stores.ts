import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import type { RequestRow } from '../src/store/requests.js';
import type { RunRow } from '../src/store/types.js';
import { runs, type Sandbox, sandbox } from './helpers.js';
import { pgRuns, pgSandbox, sql } from './pg-helpers.js';

// The tests of features both stores have run against each: the embedded SQLite log and a
// shared PostgreSQL one.
export const STORES = ['sqlite', 'postgres'] as const;
export type StoreKind = (typeof STORES)[number];

export interface StoreBox extends Sandbox {
  readonly kind: StoreKind;
  // A job name of this test's own (advisory locks are shared by the whole server).
  job(base: string): string;
  runs(): Promise<RunRow[]>;
  requests(): Promise<RequestRow[]>;
  // A request made as a web application makes it: the documented statement, in SQL.
  request(job: string, args?: string[]): Promise<number>;
}

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
      request: async (job, args = []) => {
        const d = db();
        try {
          return (d.prepare('INSERT INTO requests (job, args) VALUES (?, ?) RETURNING id').get(job, JSON.stringify(args)) as { id: number }).id;
        } finally {
          d.close();
        }
      },
    };
  }
  const box = pgSandbox();
  return {
    ...box,
    kind,
    runs: async () => (await pgRuns(box.schema)).map(asJson),
    requests: async () => (await sql<RequestRow>(`SELECT * FROM "${box.schema}".requests ORDER BY id`)).map(asJson),
    request: async (job, args = []) => Number((await sql<{ id: string }>(`SELECT "${box.schema}".request($1, $2) AS id`, [job, args]))[0]?.id),
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
