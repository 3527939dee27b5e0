import { UnavailableError, UsageError } from '../../errors.js';
import { type Lock, type LockBackend, retryUntil } from '../../lock/backend.js';
import { type Messages, sleep } from '../../util/io.js';
import { sha256 } from '../../util/sha256.js';
import type { DatabaseLock } from '../shared.js';
import { DEFAULT_SCHEMA, pgError } from './config.js';
import { standbyRefusal } from './server-state.js';
import type { PgSession } from './session.js';

export interface PostgresLockBackend extends LockBackend {
  // The lock as held by this session, for a statement that took it together with the
  // run's record (see PostgresStore.lockAndAdmit).
  readonly held: Lock;
  tryOnce(): Promise<Lock | null>;
  // A statement of the run log released the lock (PostgresStore.finishRun): nothing to do.
  releasedElsewhere(): void;
}

// Whether server backend `pid` (an SQL expression) holds advisory lock `key` (a bigint SQL
// expression). pg_locks shows a bigint key as classid (its high 32 bits) and objid (its low
// 32 bits), both unsigned, with objsubid 1; a backend's locks are of its own database.
export function advisoryHeld(key: string, pid: string): string {
  return `EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND pid = ${pid} AND granted AND objsubid = 1 AND classid = ((${key} >> 32) & 4294967295)::oid AND objid = (${key} & 4294967295)::oid)`;
}

// When this server backend started, as text (exact to the microsecond, unlike a Date): with
// its pid, what names the backend a lock was taken on (see RELEASE).
export const BACKEND_START = '(SELECT backend_start::text FROM pg_stat_get_activity(pg_backend_pid()))';

// The lock, unless this server backend already holds it: a session lock is re-entrant, and a
// backend that holds it without this session having taken it is shared with another client
// (a pooler in transaction mode), which must not be taken for "ours" (got is null then). Nor
// on a standby (got is null, standby true), where a lock fences nothing: a pooler may pass
// one off as the primary it knew (see server-state.ts).
const TRY = `SELECT CASE WHEN pg_is_in_recovery() OR ${advisoryHeld('$1::bigint', 'pg_backend_pid()')} THEN NULL ELSE pg_try_advisory_lock($1::bigint) END AS got,
                    pg_is_in_recovery() AS standby, pg_backend_pid() AS backend, ${BACKEND_START} AS backend_start`;
// Unlocks only on the backend that took the lock ($2): anywhere else the key may be another
// client's. From another backend, a backend that holds the lock idle for the pooler is ended
// instead, which frees it: left alone it would hold the lock until the pooler closes it. That
// backend is known by its pid and its start ($3, text): a pid alone is handed out again once
// its backend has gone (the pooler closed it, a DBA ended it), and may then be any session of
// the server, of any role or database, holding the same number as an advisory key. The
// backend to end is found first (MATERIALIZED, of pg_stat_get_activity($2) alone): in a
// condition, the planner may call pg_terminate_backend on rows before the others filter them.
const RELEASE = `WITH idle AS MATERIALIZED (SELECT a.pid FROM pg_stat_get_activity($2) a
                                             WHERE a.pid = $2 AND a.pid <> pg_backend_pid() AND a.state = 'idle'
                                               AND a.backend_start = $3::timestamptz
                                               AND ${advisoryHeld('$1::bigint', 'a.pid')})
                 SELECT pg_backend_pid() AS backend,
                        CASE WHEN pg_backend_pid() = $2 AND ${advisoryHeld('$1::bigint', 'pg_backend_pid()')}
                             THEN pg_advisory_unlock($1::bigint) ELSE false END AS unlocked,
                        CASE WHEN pg_backend_pid() <> $2 THEN coalesce((SELECT bool_or(pg_terminate_backend(pid)) FROM idle), false)
                             ELSE false END AS ended`;
const RELEASE_TRIES = 20;


// The heartbeat of a session that holds the lock: the backend it reaches, and whether that
// backend holds the key.
const PROBE = `SELECT pg_backend_pid() AS backend, ${advisoryHeld('$1::bigint', 'pg_backend_pid()')} AS held`;

// One line, for a lock statement that found its server backend already holding the lock (69).
export function sharedBackend(where: string): UnavailableError {
  return new UnavailableError(`${NO_SESSION} at ${where}: its server connection already holds this job's lock for another client; nothing ran. ${USE_SESSION}`);
}

const NO_SESSION = 'the postgres lock needs a session of its own, and the connection is pooled by transaction';
const USE_SESSION = 'Connect directly or through session pooling (PgBouncer pool_mode = session)';

// A session-level advisory lock on a dedicated connection. It is held as long as the session
// lives; the heartbeat notices a lost session within seconds (see PgSession.watch), and a
// server backend that no longer holds the key (a transaction pooler routed the session
// elsewhere, or the backend was ended) as a lost lock.
export function postgresBackend(session: PgSession, key: bigint, say?: Messages): PostgresLockBackend {
  let released = false;
  const held: Lock = {
    inheritFd: null,
    commandDiesWithWrapper: true,
    onLost: (handler) => session.watch(handler),
    // The heartbeat of the session tells, in its own time (PgSession.watch).
    verify: () => {},
    heartbeat: null,
    release: async () => {
      const backend = session.lockBackend;
      if (session.isLost || released || backend === null) return;
      // If the unlock fails, closing the session releases the lock all the same, when the
      // session is the server's own connection. Through a transaction pool the unlock may
      // reach another backend, and the lock's own may be busy with another client for a
      // moment: a few more tries, 100 ms apart, only then.
      type Released = { backend: number; unlocked: boolean; ended: boolean };
      let row: Released | undefined;
      for (let attempt = 0; attempt < RELEASE_TRIES; attempt++) {
        if (attempt > 0) await sleep(100);
        [row] = await session.query<Released>(RELEASE, [key.toString(), backend, session.lockBackendStart]).catch(() => []);
        if (!row || row.unlocked || row.ended || row.backend === backend) break;
      }
      if (!row || row.unlocked) return;
      if (row.backend === backend) say?.verbose(`advisory lock ${key} was no longer held by server backend ${backend}, which took it`);
      else if (row.ended) say?.verbose(`the unlock of advisory lock ${key} reached server backend ${row.backend}, not ${backend} which held it (transaction pooling): ended ${backend} to free the lock`);
      else say?.warn(`advisory lock ${key} was not released: the unlock reached server backend ${row.backend}, not ${backend} which took it; ${backend} may hold it until the pooler closes that connection. ${USE_SESSION}`);
    },
  };
  const tryOnce = async (): Promise<Lock | null> => {
    type Tried = { got: boolean | null; standby: boolean; backend: number; backend_start: string | null };
    let row: Tried | undefined;
    try {
      [row] = await session.query<Tried>(TRY, [key.toString()]);
    } catch (error) {
      throw pgError(error, session.db.display);
    }
    if (row?.standby) throw standbyRefusal(session.db.display);
    if (row?.got === null) throw sharedBackend(session.db.display);
    if (row?.got !== true) return null;
    heldOn(session, key, row.backend, row.backend_start);
    return held;
  };
  return {
    description: `postgres advisory lock ${key} on ${session.db.display}`,
    held,
    tryOnce,
    releasedElsewhere: () => {
      released = true;
    },
    acquire: ({ waitMs, abort }) => retryUntil(tryOnce, waitMs, abort),
  };
}

// The advisory lock as the admission statement takes it (see DatabaseLock): the log is on
// the lock's session; when the log fails, the lock is taken alone.
export function advisoryLock(session: PgSession, key: bigint, say?: Messages): DatabaseLock {
  const plain = postgresBackend(session, key, say);
  return {
    description: plain.description,
    request: { kind: 'advisory', key },
    alone: { tryOnce: plain.tryOnce, backend: plain },
    spareWatchdog: true,
    taken: (admitted) => {
      heldOn(session, key, admitted.backend, admitted.backendStart);
      return { lock: plain.held, release: { kind: 'advisory', key }, releasedElsewhere: plain.releasedElsewhere };
    },
    close: () => session.close(),
  };
}

// The lock was taken on server backend `backend` (started at `backendStart`): from now on the
// heartbeat checks that the session still reaches that backend and that it still holds the key.
export function heldOn(session: PgSession, key: bigint, backend: number, backendStart: string | null): void {
  session.holdsLock(backend, backendStart, async (ask) => {
    const [row] = await ask<{ backend: number; held: boolean }>(PROBE, [key.toString()]);
    if (row?.backend !== backend) {
      return `the heartbeat reached server backend ${row?.backend}, not ${backend} which holds the lock: ${NO_SESSION}. ${USE_SESSION}`;
    }
    return row.held ? null : `server backend ${backend} no longer holds advisory lock ${key}`;
  });
}

// The advisory lock key of a job: the first 8 bytes of sha256("cronguard:" || name) read as
// a big-endian signed 64-bit integer; in a schema other than the default, the hash covers
// "cronguard:" || schema || ":" || name, so staging and production never share a lock. In
// SQL, for a DBA:
//   SELECT ('x' || left(encode(sha256(convert_to('cronguard:' || 'NAME', 'UTF8')), 'hex'), 16))::bit(64)::bigint;
export function advisoryKey(name: string, schema: string = DEFAULT_SCHEMA): bigint {
  const scope = schema === DEFAULT_SCHEMA ? '' : `${schema}:`;
  return sha256(`cronguard:${scope}${name}`).readBigInt64BE(0);
}

// The key the migrations of a schema serialise on; no job's key can equal it.
export function migrationKey(schema: string): bigint {
  return sha256(`cronguard-migrate:${schema}`).readBigInt64BE(0);
}

const MIN = -(2n ** 63n);
const MAX = 2n ** 63n - 1n;

// --lock-key N: a signed 64-bit integer, for locks an application already takes.
export function parseLockKey(text: string): bigint {
  if (/^-?\d{1,20}$/.test(text)) {
    const key = BigInt(text);
    if (key >= MIN && key <= MAX) return key;
  }
  throw new UsageError(`--lock-key: '${text}' is not a signed 64-bit integer`);
}
