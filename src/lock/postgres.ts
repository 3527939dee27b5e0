import { UsageError } from '../errors.js';
import type { PgSession } from '../pg/session.js';
import { sha256 } from '../util/name.js';
import { type Lock, type LockBackend, retryUntil } from './backend.js';

// Tries the lock once; true when this session now holds it. The default is a plain
// pg_try_advisory_lock; the run path passes one that also records the run in the same
// statement when the run log shares the session.
export type TryLock = () => Promise<boolean>;

// A session-level advisory lock on a dedicated connection. It is held as long as the session
// lives; the heartbeat notices a lost session within seconds (see PgSession.watch).
export function postgresBackend(session: PgSession, key: bigint, tryLock?: TryLock): LockBackend {
  const plain: TryLock = async () => {
    const [row] = await session.query<{ got: boolean }>('SELECT pg_try_advisory_lock($1::bigint) AS got', [key.toString()]);
    return row?.got === true;
  };
  const attempt = tryLock ?? plain;
  const lock: Lock = {
    inheritFd: null,
    commandDiesWithWrapper: true,
    onLost: (handler) => session.watch(handler),
    release: async () => {
      if (!session.isLost) {
        // If the unlock fails, closing the session releases the lock all the same.
        await session.query('SELECT pg_advisory_unlock($1::bigint)', [key.toString()]).catch(() => {});
      }
    },
  };
  return {
    description: `postgres advisory lock ${key} on ${session.db.display}`,
    acquire: ({ waitMs }) => retryUntil(async () => ((await attempt()) ? lock : null), waitMs),
  };
}

// The advisory lock key of a job: the first 8 bytes of sha256("cronguard:" || name) read as
// a big-endian signed 64-bit integer. In SQL, for a DBA:
//   SELECT ('x' || left(encode(sha256(convert_to('cronguard:' || 'NAME', 'UTF8')), 'hex'), 16))::bit(64)::bigint;
export function advisoryKey(name: string): bigint {
  return sha256(`cronguard:${name}`).readBigInt64BE(0);
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
