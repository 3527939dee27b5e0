import { join } from 'node:path';
import type { RunConfig } from '../cli/config.js';
import { BUSY_RETRY_MS, type Connection } from '../pg/config.js';
import type { ConnectOptions } from '../pg/connect.js';
import type { PgSession } from '../pg/session.js';
import { connectPostgres, openPostgresStore, openSqliteStore } from '../store/index.js';
import type { PostgresStore } from '../store/postgres.js';
import type { SchemaMemory } from '../store/postgres-base.js';
import type { RunStore } from '../store/types.js';
import type { Messages } from '../util/io.js';
import { touch, touchedSince, unlinkQuietly } from '../util/stamp.js';
import { logTarget } from './housekeeping.js';
import { RunRecorder } from './recorder.js';

// The run log of an invocation, as wiring.ts opens it: the embedded one, or the shared one
// in PostgreSQL with its spool, its reconnection to record, and the schema stamp.

// A busy server (no free connection slot) is retried for a few seconds, or for as long as
// -w lets the run wait. A run locks and records on the primary: a standby is refused.
export function connectOptions(config: RunConfig, say: Messages, abort?: AbortSignal): ConnectOptions {
  return {
    retryForMs: Math.max(BUSY_RETRY_MS, config.waitMs),
    onRetry: (retry, delayMs, reason) => say.verbose(`${config.name}: PostgreSQL is busy (${reason}); retry ${retry} in ${delayMs}ms`),
    abort,
    primary: true,
  };
}

// How long a reconnection made to record (after the first session was lost) may take, and
// then leave a statement unanswered, before the record goes to the spool. Longer than the
// server's lock_timeout on the log's writes (5 s, migration 0013): a write waiting behind a
// locked table is cancelled by the server first, so it cannot commit after it was spooled.
const RECORD_GIVE_UP_MS = 8000;

// A server as older versions keyed its spool: host:port, the host as written.
function serverKey(conn: Connection): string {
  return `${conn.host}:${conn.port}`;
}

export async function sqliteLog(config: RunConfig, say: Messages): Promise<RunRecorder> {
  let store: RunStore | null = null;
  let openError: unknown = null;
  if (config.log === 'sqlite') {
    try {
      store = await openSqliteStore(config.stateDir);
    } catch (error) {
      openError = error;
    }
  }
  return new RunRecorder({ store, spool: null, reopen: null, openError, where: `in ${config.stateDir}` }, say);
}

// The shared log, on the lock's session when there is one. Records that cannot reach it
// go to the spool in the state dir. A signal stops its first connection (the run has not
// begun), never a reconnection to record an outcome.
export async function postgresLog(
  config: RunConfig,
  say: Messages,
  session: PgSession | null,
  abort?: AbortSignal,
): Promise<{ recorder: RunRecorder; store: PostgresStore | null }> {
  const db = config.db as NonNullable<RunConfig['db']>;
  const { Spool } = await import('../store/spool.js');
  const connect = (signal?: AbortSignal) => connectPostgres(db, `cronguard:${config.name}`, connectOptions(config, say, signal));
  // The database and schema, whoever connects to them: a record one role spooled is
  // delivered by the next run that may write. See Spool for the keys.
  const scope = `${db.connection.database}/${db.schema}`;
  const memory = schemaMemory(config, (await import('../store/postgres-migrations.js')).POSTGRES_MIGRATIONS.length);
  const spool = new Spool(config.stateDir, `${db.servers.map((s) => serverKey(s.connection)).join(',')}/${scope}`, scope);
  // A store on the server a session reached: its directory (and, once known, its
  // identity's) is the spool's too.
  const opened = async (reached: PgSession): Promise<PostgresStore> => {
    const store = await openPostgresStore(reached, db.schema, true, memory);
    spool.reached(`${serverKey(reached.db.connection)}/${scope}`);
    store.onIdentity = (identity) => spool.identify(identity);
    return store;
  };
  let store: PostgresStore | null = null;
  let openError: unknown = null;
  try {
    store = await opened(session ?? (await connect(abort)));
  } catch (error) {
    if (abort?.aborted) throw error;
    openError = error;
  }
  const recorder = new RunRecorder(
    {
      store,
      spool,
      // After the first session was lost, a record gives up within seconds and goes to the
      // spool, rather than waiting out a connect timeout or the 30 s a statement may take
      // (a pooler that accepted the connection but has no server behind it answers nothing).
      reopen: async (signal) => {
        const limit = AbortSignal.timeout(RECORD_GIVE_UP_MS);
        const reopened = await connect(signal ? AbortSignal.any([signal, limit]) : limit).catch((error) => {
          throw limit.aborted && !signal?.aborted ? new Error(`no session within ${RECORD_GIVE_UP_MS / 1000} s`) : error;
        });
        reopened.answerWithin(RECORD_GIVE_UP_MS);
        return opened(reopened);
      },
      openError,
      where: `${store?.session.db.display ?? db.display} (schema ${db.schema})`,
    },
    say,
  );
  return { recorder, store };
}

// The schema stamp: a file in the state dir whose name carries the schema version this code
// needs, touched once this host found the schema at it. An upgraded cronguard asks again.
function schemaMemory(config: RunConfig, version: number): SchemaMemory {
  const file = join(config.stateDir, `schema-${logTarget(config)}-v${version}.stamp`);
  return {
    current: touchedSince(file, 0),
    remember: () => touch(config.stateDir, file, Date.now()),
    forget: () => unlinkQuietly(file),
  };
}
