import { advisoryKey } from '../lock/postgres.js';
import type { PgSession } from '../pg/session.js';
import m0001 from './migrations/postgres/0001_initial.sql';

// Numbered migrations, applied in order. Append only: an applied file is never edited.
export const POSTGRES_MIGRATIONS: readonly string[] = [m0001];

// Creates the schema and applies what is missing. Hosts starting at once serialise on a
// transaction-level advisory lock; each migration's row is inserted first, in the same
// transaction, so one can never be applied twice.
export async function migratePostgres(session: PgSession, schema: string): Promise<number> {
  const s = session.escapeIdentifier(schema);
  await session.query('BEGIN');
  try {
    await session.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryKey(`migrate:${schema}`).toString()]);
    await session.query(`CREATE SCHEMA IF NOT EXISTS ${s}`);
    await session.query(
      `CREATE TABLE IF NOT EXISTS ${s}.schema_migrations (
         version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const [row] = await session.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${s}.schema_migrations`);
    for (let v = row?.v ?? 0; v < POSTGRES_MIGRATIONS.length; v++) {
      await session.query(`INSERT INTO ${s}.schema_migrations (version) VALUES ($1)`, [v + 1]);
      await session.query((POSTGRES_MIGRATIONS[v] as string).replaceAll('{{schema}}', s));
    }
    await session.query('COMMIT');
  } catch (error) {
    // The original error is the one worth reporting; a failed rollback ends with the session.
    await session.query('ROLLBACK').catch(() => {});
    throw error;
  }
  return POSTGRES_MIGRATIONS.length;
}
