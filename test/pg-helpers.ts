import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterEach, inject } from 'vitest';
import type { RunRow } from '../src/store/types.js';
import { type Sandbox, sandbox } from './helpers.js';

const schemas: string[] = [];
afterEach(async () => {
  const drop = schemas.splice(0);
  if (drop.length === 0) return;
  await sql(`DROP SCHEMA IF EXISTS ${drop.map((s) => `"${s}"`).join(', ')} CASCADE`);
});

export const databaseUrl = (): string => inject('databaseUrl');

// A sandbox whose run log is a fresh schema of the test server, dropped afterwards. Job
// names must be unique too: advisory locks are shared by the whole database.
export function pgSandbox(): Sandbox & { schema: string; job: (base: string) => string } {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  schemas.push(schema);
  const box = sandbox();
  const env = { ...box.env, CRONGUARD_DATABASE_URL: databaseUrl(), CRONGUARD_SCHEMA: schema };
  return { ...box, env, schema, job: (base) => `${base}-${schema}` };
}

export async function sql<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

export async function pgRuns(schema: string): Promise<RunRow[]> {
  try {
    return await sql<RunRow>(`SELECT * FROM "${schema}".runs ORDER BY id`);
  } catch (error) {
    if ((error as { code?: string }).code === '42P01') return [];
    throw error;
  }
}

// The backend pid of a cronguard session, found by its application_name.
export async function backendOf(job: string): Promise<number | null> {
  const [row] = await sql<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [
    `cronguard:${job}`.slice(0, 63),
  ]);
  return row?.pid ?? null;
}

// A connection held open by the test, e.g. to hold an advisory lock as an application would.
export async function holdingClient(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  return client;
}
