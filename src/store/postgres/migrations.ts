import { migrationKey } from './lock.js';
import m0001 from './migrations/0001_initial.sql';
import m0002 from './migrations/0002_ticks_and_locks.sql';
import m0003 from './migrations/0003_run_keys.sql';
import m0004 from './migrations/0004_requests.sql';
import m0005 from './migrations/0005_admission.sql';
import m0006 from './migrations/0006_observability.sql';
import m0007 from './migrations/0007_serial_claims.sql';
import m0008 from './migrations/0008_blocked.sql';
import m0009 from './migrations/0009_request_errors.sql';
import m0010 from './migrations/0010_request_args.sql';
import m0011 from './migrations/0011_settled_claims.sql';
import m0012 from './migrations/0012_admission.sql';
import m0013 from './migrations/0013_pooler_bounds.sql';
import m0014 from './migrations/0014_leases.sql';
import m0015 from './migrations/0015_long_leases.sql';
import m0016 from './migrations/0016_parked_skips.sql';
import m0017 from './migrations/0017_schedules.sql';
import m0018 from './migrations/0018_cron.sql';
import m0019 from './migrations/0019_scheduled_admission.sql';
import m0020 from './migrations/0020_alerts.sql';
import m0021 from './migrations/0021_maintenance.sql';
import m0022 from './migrations/0022_stop_requests.sql';
import m0023 from './migrations/0023_lock_time_start.sql';
import m0024 from './migrations/0024_alert_delivery.sql';
import m0025 from './migrations/0025_spacing.sql';
import m0026 from './migrations/0026_holding.sql';
import type { PgSession } from './session.js';
import { SCHEMA_STATE } from './sql-schema.js';

// Numbered migrations, applied in order. Append only: an applied file is never edited. The
// functions they leave, as they run now, are in functions/ (one file each).
export const POSTGRES_MIGRATIONS: readonly string[] = [m0001, m0002, m0003, m0004, m0005, m0006, m0007, m0008, m0009, m0010, m0011, m0012, m0013, m0014, m0015, m0016, m0017, m0018, m0019, m0020, m0021, m0022, m0023, m0024, m0025, m0026];

// Creates the schema and applies what is missing. A current schema is only read, so a role
// without CREATE can run `migrate`. Hosts starting at once serialise on a transaction-level
// advisory lock; each migration's row is inserted first, in the same transaction, so one can
// never be applied twice. Every step asks before it acts (schemaState): first runs racing on
// a fresh database, and roles that may not migrate, leave no ERROR in the server's log.
export async function migratePostgres(session: PgSession, schema: string): Promise<number> {
  const s = session.escapeIdentifier(schema);
  const latest = POSTGRES_MIGRATIONS.length;
  const before = await schemaState(session, schema);
  if ((await appliedVersion(session, s, before)) >= latest) return latest;
  mayMigrate(before, schema, session.db.connection.database);
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
