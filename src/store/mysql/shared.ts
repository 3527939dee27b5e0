import type { LockSpec } from '../../lock/lock-spec.js';
import type { Messages } from '../../util/io.js';
import type { FleetRun, SchemaMemory, SharedDatabase, SharedLog, SharedStore } from '../shared.js';
import { openSharedLog } from '../shared-log.js';
import { Spool } from '../spool.js';
import type { MysqlConfig } from './config.js';
import { connectMysqlServer, type MysqlConnectOptions } from './connect.js';
import { isPrivilegeError, isServerError, mysqlError, readOnlyRun } from './errors.js';
import { LOCK_IDLE_S } from './lock-name.js';
import type { MysqlSession } from './session.js';
import type { MysqlStore } from './store.js';

// MySQL or MariaDB as the fleet's database (see ../shared.ts): the run log in a database of
// its own, with its spool and its reconnection to record; GET_LOCK on a session of its own.
// This file, the driver and the store load only when a MySQL URL is used.

// A busy server (no free connection) is retried this long, or for as long as -w lets the
// run wait, as PostgreSQL's.
const BUSY_RETRY_MS = 5000;
// How long a reconnection made to record (after the first session was lost) may take, and
// then leave a statement unanswered, before the record goes to the spool: longer than the
// session's innodb_lock_wait_timeout (5 s, see connect.ts), so that a write waiting behind a
// locked row is cancelled by the server first and cannot commit after it was spooled.
const RECORD_GIVE_UP_MS = 8000;

// The run log's code: MysqlStore and the schema version its migrations reach.
async function storeModule(): Promise<{ open(session: MysqlSession, schema: string, create: boolean, memory: SchemaMemory | null): SharedStore; version: number }> {
  const [{ MysqlStore }, { MYSQL_SCHEMA_VERSION }] = await Promise.all([import('./store.js'), import('./migrations.js')]);
  return { open: (session, schema, create, memory) => new MysqlStore(session, schema, create, memory), version: MYSQL_SCHEMA_VERSION };
}

// The shared log for a subcommand or the web page.
export async function openMysqlShared(db: MysqlConfig, applicationName: string, create: boolean, abort?: AbortSignal): Promise<SharedStore> {
  const [session, store] = await Promise.all([connectMysqlServer(db, applicationName, { retryForMs: BUSY_RETRY_MS, abort }), storeModule()]);
  return store.open(session, db.schema, create, null);
}

export function mysqlDatabase(config: FleetRun, db: MysqlConfig, say: Messages): SharedDatabase {
  const options = (abort?: AbortSignal): MysqlConnectOptions => ({
    retryForMs: Math.max(BUSY_RETRY_MS, config.waitMs),
    onRetry: (retry, delayMs, reason) => say.verbose(`${config.name}: MySQL is busy (${reason}); retry ${retry} in ${delayMs}ms`),
    abort,
  });
  const connect = (abort?: AbortSignal) => connectMysqlServer(db, `cronguard:${config.name}`, options(abort));
  // A session the server ends once it falls silent, so that a partition strands the lock for
  // a minute, not for the server's wait_timeout (8 hours by default).
  const connectForLock = (abort?: AbortSignal) => connectMysqlServer(db, `cronguard:${config.name}`, { ...options(abort), idleTimeoutS: LOCK_IDLE_S });
  // The lock's session, which a reconnection makes again as such.
  let lockSession: MysqlSession | null = null;
  return {
    name: 'MySQL',
    connectLock(abort) {
      const connecting = connectForLock(abort).then((session) => (lockSession = session));
      // The lock's code loads while the connection is made (the failure is the caller's await).
      connecting.catch(() => {});
      return import('./lock.js').then(() => connecting);
    },
    openLog: (lockSession, memory, abort) => openLog(config, db, connect, lockSession as MysqlSession | null, memory, abort),
    async sessionLock(session, lock: Extract<LockSpec, { kind: 'named' }>) {
      const { mysqlLock } = await import('./lock.js');
      return mysqlLock(session as MysqlSession, lock.name, say);
    },
    async leaseLock(store, openError, lock) {
      // The lease lives in the log: without it there is no lock (69).
      if (!store) throw mysqlError(openError ?? new Error('the run log is out of reach'), db.display);
      const { mysqlLeaseLock } = await import('./lease.js');
      return mysqlLeaseLock(config.name, lock, db, store as MysqlStore, say);
    },
    async reconnect(session, abort) {
      (session as MysqlSession).adopt(await (session === lockSession ? connectForLock : connect)(abort));
    },
    error: (error) => mysqlError(error, db.display),
    isServerError,
    readOnly: (error) => readOnlyRun(error, db.display),
  };
}

// The shared log, on the lock's session when there is one (shared-log.ts). Records that
// cannot reach it are spooled under the server, port and database of the tables: a record
// is delivered only into the log it was meant for.
function openLog(
  config: FleetRun,
  db: MysqlConfig,
  connect: (abort?: AbortSignal) => Promise<MysqlSession>,
  session: MysqlSession | null,
  memory: (version: number) => SchemaMemory,
  abort?: AbortSignal,
): Promise<SharedLog> {
  const spool = new Spool(config.stateDir, `mysql ${db.socket ?? `${db.host}:${db.port}`}/${db.schema}`, `mysql:${db.schema}`);
  return openSharedLog<MysqlSession>({
    spool,
    session,
    connect,
    code: storeModule(),
    async open(reached) {
      const code = await storeModule();
      const log = code.open(reached, db.schema, true, memory(code.version));
      const identified = log as SharedStore & { onIdentity?: ((identity: string) => void) | null };
      if ('onIdentity' in identified) identified.onIdentity = (identity) => spool.identify(identity);
      return log;
    },
    recordGiveUpMs: RECORD_GIVE_UP_MS,
    where: () => `${db.display} (database ${db.schema})`,
    denied: isPrivilegeError,
    abort,
  });
}
