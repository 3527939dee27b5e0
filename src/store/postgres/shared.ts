import type { LockSpec } from '../../lock/lock-spec.js';
import type { Messages } from '../../util/io.js';
import { connectPostgres, openPostgresStore } from '../index.js';
import type { FleetRun, SchemaMemory, SharedDatabase, SharedLog } from '../shared.js';
import { openSharedLog } from '../shared-log.js';
import { Spool } from '../spool.js';
import { BUSY_RETRY_MS, type Connection, type DbConfig, isPrivilegeError, isServerError, pgError, readOnlyRun } from './config.js';
import type { ConnectOptions } from './connect.js';
import { POSTGRES_SCHEMA_VERSION } from './migrations.js';
import type { PgSession } from './session.js';
import type { PostgresStore } from './store.js';

// PostgreSQL as the fleet's database (see shared.ts): the run log in a schema, with its
// spool, its reconnection to record and the schema stamp; the advisory lock on a session
// of its own, or a lease in the log.

// A reconnection's bound to record (shared-log.ts): longer than the server's lock_timeout
// on the log's writes (5 s, migration 0013).
const RECORD_GIVE_UP_MS = 8000;

// A busy server (no free connection slot) is retried for a few seconds, or for as long as
// -w lets the run wait. A run locks and records on the primary: a standby is refused.
function connectOptions(config: FleetRun, say: Messages, abort?: AbortSignal): ConnectOptions {
  return {
    retryForMs: Math.max(BUSY_RETRY_MS, config.waitMs),
    onRetry: (retry, delayMs, reason) => say.verbose(`${config.name}: PostgreSQL is busy (${reason}); retry ${retry} in ${delayMs}ms`),
    abort,
    primary: true,
  };
}

// A server as older versions keyed its spool: host:port, the host as written.
function serverKey(conn: Connection): string {
  return `${conn.host}:${conn.port}`;
}

export async function openPostgresShared(db: DbConfig, applicationName: string, create: boolean, abort?: AbortSignal): Promise<PostgresStore> {
  return openPostgresStore(await connectPostgres(db, applicationName, { retryForMs: BUSY_RETRY_MS, abort }), db.schema, create);
}

export function postgresDatabase(config: FleetRun, db: DbConfig, say: Messages): SharedDatabase {
  const connect = (signal?: AbortSignal) => connectPostgres(db, `cronguard:${config.name}`, connectOptions(config, say, signal));
  return {
    name: 'PostgreSQL',
    connectLock(abort) {
      const connecting = connect(abort);
      // The code that will use the session (the lock's, the log's) loads while the server
      // starts its backend: after the connection is asked for, which the promises above lead
      // to before the next turn of the event loop, not before it (its failure is the caller's
      // await; this catch only keeps it from counting as unhandled meanwhile).
      connecting.catch(() => {});
      return new Promise((resolve) => setImmediate(resolve))
        .then(() => Promise.all([import('./lock.js'), import('./store.js')]))
        .then(() => connecting);
    },
    openLog: (lockSession, memory, abort) => openLog(config.stateDir, db, connect, lockSession as PgSession | null, memory(POSTGRES_SCHEMA_VERSION), abort),
    async sessionLock(session, lock: Extract<LockSpec, { kind: 'advisory' }>) {
      const { advisoryLock } = await import('./lock.js');
      return advisoryLock(session as PgSession, lock.key, say);
    },
    async leaseLock(store, openError, lock) {
      if (!store) throw pgError(openError ?? new Error('the run log is out of reach'), db.display);
      const log = store as PostgresStore;
      log.sessionless = true;
      const { leaseLock } = await import('./lease.js');
      return leaseLock(config.name, lock, db, log, say);
    },
    async reconnect(session, abort) {
      (session as PgSession).adopt(await connect(abort));
    },
    error: (error) => pgError(error, db.display),
    isServerError,
    readOnly: (error) => readOnlyRun(error, db.display),
  };
}

// The shared log, on the lock's session when there is one (shared-log.ts).
function openLog(
  stateDir: string,
  db: DbConfig,
  connect: (signal?: AbortSignal) => Promise<PgSession>,
  session: PgSession | null,
  memory: SchemaMemory,
  abort?: AbortSignal,
): Promise<SharedLog> {
  // The database and schema, whoever connects to them: a record one role spooled is
  // delivered by the next run that may write. See Spool for the keys.
  const scope = `${db.connection.database}/${db.schema}`;
  const spool = new Spool(stateDir, `${db.servers.map((s) => serverKey(s.connection)).join(',')}/${scope}`, scope);
  return openSharedLog<PgSession>({
    spool,
    session,
    connect,
    code: import('./store.js'),
    // A store on the server a session reached: its directory (and, once known, its
    // identity's) is the spool's too.
    async open(reached) {
      const store = await openPostgresStore(reached, db.schema, true, memory);
      spool.reached(`${serverKey(reached.db.connection)}/${scope}`);
      store.onIdentity = (identity) => spool.identify(identity);
      return store;
    },
    recordGiveUpMs: RECORD_GIVE_UP_MS,
    where: (store) => `${(store as PostgresStore | null)?.session.db.display ?? db.display} (schema ${db.schema})`,
    denied: isPrivilegeError,
    abort,
  });
}
