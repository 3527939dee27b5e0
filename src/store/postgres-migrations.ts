import { migrationKey } from '../lock/postgres.js';
import type { PgSession } from '../pg/session.js';
import m0001 from './migrations/postgres/0001_initial.sql';
import m0002 from './migrations/postgres/0002_ticks_and_locks.sql';
import m0003 from './migrations/postgres/0003_run_keys.sql';
import m0004 from './migrations/postgres/0004_requests.sql';
import m0005 from './migrations/postgres/0005_admission.sql';
import m0006 from './migrations/postgres/0006_observability.sql';
import m0007 from './migrations/postgres/0007_serial_claims.sql';
import m0008 from './migrations/postgres/0008_blocked.sql';
import m0009 from './migrations/postgres/0009_request_errors.sql';
import m0010 from './migrations/postgres/0010_request_args.sql';
import m0011 from './migrations/postgres/0011_settled_claims.sql';
import m0012 from './migrations/postgres/0012_admission.sql';
import m0017 from './migrations/postgres/0017_pooler_bounds.sql';

// Numbered migrations, applied in order. Append only: an applied file is never edited.
export const POSTGRES_MIGRATIONS: readonly string[] = [m0001, m0002, m0003, m0004, m0005, m0006, m0007, m0008, m0009, m0010, m0011, m0012, m0017];

// Creates the schema and applies what is missing. A current schema is only read, so a role
// without CREATE can run `migrate`. Hosts starting at once serialise on a transaction-level
// advisory lock; each migration's row is inserted first, in the same transaction, so one can
// never be applied twice.
export async function migratePostgres(session: PgSession, schema: string): Promise<number> {
  const s = session.escapeIdentifier(schema);
  const latest = POSTGRES_MIGRATIONS.length;
  if ((await appliedVersion(session, s)) >= latest) return latest;
  await session.query('BEGIN');
  try {
    // A migration may wait for another host's, and may take long on a big log: bounds a role
    // or database may set are for the run path's statements (its own live on its functions).
    await session.query('SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0');
    await session.query('SELECT pg_advisory_xact_lock($1::bigint)', [migrationKey(schema).toString()]);
    const [present] = await session.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    if (!present) await session.query(`CREATE SCHEMA ${s}`);
    await session.query(
      `CREATE TABLE IF NOT EXISTS ${s}.schema_migrations (
         version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    for (let v = await appliedVersion(session, s); v < latest; v++) {
      await session.query(`INSERT INTO ${s}.schema_migrations (version) VALUES ($1)`, [v + 1]);
      await session.query((POSTGRES_MIGRATIONS[v] as string).replaceAll('{{schema}}', s));
    }
    await session.query('COMMIT');
  } catch (error) {
    // The original error is the one worth reporting; a failed rollback ends with the session.
    await session.query('ROLLBACK').catch(() => {});
    throw error;
  }
  return latest;
}

// The schema's version; 0 when it or its migrations table does not exist yet.
async function appliedVersion(session: PgSession, s: string): Promise<number> {
  try {
    const [row] = await session.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${s}.schema_migrations`);
    return row?.v ?? 0;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === '42P01' || code === '3F000') return 0;
    throw error;
  }
}
