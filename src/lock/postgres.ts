import type { PgSession } from '../pg/session.js';
import type { Lock, LockBackend } from './types.js';
import { retryUntil } from './wait.js';

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
    description: `postgres advisory lock ${key} on ${session.db.display}`,
    inheritFd: null,
    onLost: (handler) => session.watch(handler),
    release: async () => {
      if (!session.isLost) {
        await session.query('SELECT pg_advisory_unlock($1::bigint)', [key.toString()]).catch(() => {});
      }
    },
  };
  return {
    name: 'postgres',
    acquire: ({ waitMs }) => retryUntil(async () => ((await attempt()) ? lock : null), waitMs),
  };
}
