import { UsageError } from '../errors.js';
import { DEFAULT_SCHEMA, pgError } from '../pg/config.js';
import type { PgSession } from '../pg/session.js';
import { sha256 } from '../util/sha256.js';
import { type Lock, type LockBackend, retryUntil } from './backend.js';

export interface PostgresLockBackend extends LockBackend {
  // The lock as held by this session, for a statement that took it together with the
  // run's record (see PostgresStore.lockAndAdmit).
  readonly held: Lock;
  tryOnce(): Promise<Lock | null>;
  // A statement of the run log released the lock (PostgresStore.finishRun): nothing to do.
  releasedElsewhere(): void;
}

// A session-level advisory lock on a dedicated connection. It is held as long as the session
// lives; the heartbeat notices a lost session within seconds (see PgSession.watch).
export function postgresBackend(session: PgSession, key: bigint): PostgresLockBackend {
  let released = false;
  const held: Lock = {
    inheritFd: null,
    commandDiesWithWrapper: true,
    onLost: (handler) => session.watch(handler),
    // The heartbeat of the session tells, in its own time (PgSession.watch).
    verify: () => {},
    heartbeat: null,
    release: async () => {
      if (!session.isLost && !released) {
        // If the unlock fails, closing the session releases the lock all the same.
        await session.query('SELECT pg_advisory_unlock($1::bigint)', [key.toString()]).catch(() => {});
      }
    },
  };
  const tryOnce = async (): Promise<Lock | null> => {
    try {
      const [row] = await session.query<{ got: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS got', [key.toString()]);
      return row?.got === true ? held : null;
    } catch (error) {
      throw pgError(error, session.db.display);
    }
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
