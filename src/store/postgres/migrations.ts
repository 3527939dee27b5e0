import { migrationKey } from './lock.js';
import type { PgSession } from './session.js';
import { SCHEMA_STATE } from './sql-schema.js';

// The schema version this code reads and writes: how many numbered migrations there are
// (held to the list by test/store/migration-versions.test.ts). The run path compares with it
// on every start; the migrations' text loads only when one is applied.
export const POSTGRES_SCHEMA_VERSION = 29;

// Creates the schema and applies what is missing. A current schema is only read, so a role
// without CREATE can run `migrate`. Hosts starting at once serialise on a transaction-level
// advisory lock; each migration's row is inserted first, in the same transaction, so one can
// never be applied twice. Every step asks before it acts (schemaState): first runs racing on
// a fresh database, and roles that may not migrate, leave no ERROR in the server's log.
export async function migratePostgres(session: PgSession, schema: string): Promise<number> {
  const s = session.escapeIdentifier(schema);
  const latest = POSTGRES_SCHEMA_VERSION;
  const before = await schemaState(session, schema);
  if ((await appliedVersion(session, s, before)) >= latest) return latest;
  mayMigrate(before, schema, session.db.connection.database);
  const { POSTGRES_MIGRATIONS } = await import('./migration-files.js');
  await session.query('BEGIN');
  try {
    // A migration may wait for another host's, and may take long on a big log: bounds a role
    // or database may set are for the run path's statements (its own live on its functions).
    await session.query('SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0');
    await session.query('SELECT pg_advisory_xact_lock($1::bigint)', [migrationKey(schema).toString()]);
    // What the host that held the lock before us left (a statement after the lock sees it).
    const state = await schemaState(session, schema);
    if (!state.present) await session.query(`CREATE SCHEMA ${s}`);
    if (!state.versioned) {
      await session.query(`CREATE TABLE ${s}.schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    }
    for (let v = state.versioned ? await appliedVersion(session, s, state) : 0; v < latest; v++) {
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

export interface SchemaState {
  readonly present: boolean;
  // The role may use the schema (USAGE); the rest is false where it may not.
  readonly usable: boolean;
  // The role owns the schema (or is a member of its owner, or a superuser): it may migrate it.
  readonly owner: boolean;
  readonly may_create: boolean;
  // schema_migrations exists and the role may read it.
  readonly versioned: boolean;
  readonly may_delete: boolean;
}

// See SCHEMA_STATE: one statement that never fails.
export async function schemaState(session: PgSession, schema: string): Promise<SchemaState> {
  const [row] = await session.query<SchemaState>(SCHEMA_STATE.text, [schema]);
  return row as SchemaState;
}

// The schema's version; 0 when it or its migrations table does not exist yet (or may not be read).
export async function appliedVersion(session: PgSession, s: string, state: SchemaState): Promise<number> {
  if (!state.versioned) return 0;
  const [row] = await session.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${s}.schema_migrations`);
  return row?.v ?? 0;
}

// A role that may not make the schema (or upgrade it) is told so before any statement that
// would fail: the error reads as the server's would (42501, mapped to 77 by pgError).
function mayMigrate(state: SchemaState, schema: string, database: string): void {
  if (state.present && !state.usable) throw Object.assign(new Error(`permission denied for schema ${schema}`), { code: '42501' });
  const why = !state.present
    ? state.may_create ? null : `permission denied to create schema ${schema} in database ${database}`
    : state.owner ? null : `permission denied to upgrade schema ${schema}: only its owner may`;
  if (why) throw Object.assign(new Error(`${why} (run cronguard migrate as its owner)`), { code: '42501' });
}
