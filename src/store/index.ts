import type { DbConfig } from './postgres/config.js';
import type { ConnectOptions } from './postgres/connect.js';
import type { PgSession } from './postgres/session.js';
import type { PostgresStore } from './postgres/store.js';
import type { RunStore } from './run-store.js';
import type { SchemaMemory } from './shared.js';

// Opens the run logs. Each store's code, and its driver, loads on first use: a run never
// pays for the one it does not use.
export async function openSqliteStore(stateDir: string, readOnly = false): Promise<RunStore> {
  const { SqliteStore } = await import('./sqlite/store.js');
  return readOnly ? SqliteStore.openReadOnly(stateDir) : SqliteStore.open(stateDir);
}

// A dedicated PostgreSQL session named after the job, so it shows in pg_stat_activity.
export async function connectPostgres(db: DbConfig, applicationName: string, options?: ConnectOptions): Promise<PgSession> {
  const { connect, BUSY_RETRY_MS } = await import('./postgres/connect.js');
  return connect(db, applicationName, options ?? { retryForMs: BUSY_RETRY_MS });
}

export async function openPostgresStore(session: PgSession, schema: string, create = true, memory: SchemaMemory | null = null): Promise<PostgresStore> {
  const { PostgresStore } = await import('./postgres/store.js');
  return new PostgresStore(session, schema, create, memory);
}

export type { RunStore };
