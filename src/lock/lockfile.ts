import { lock as properLock } from 'proper-lockfile';
import { describe, fileError } from '../errors.js';
import { type Lock, type LockBackend, retryUntil } from './backend.js';

// proper-lockfile's lock is a directory whose mtime the holder refreshes; a lock not
// refreshed for STALE_MS is considered abandoned and may be taken over. Unlike flock, it dies
// with the wrapper, not with the command, so the command gets a parent-death signal; what
// the command started in the background is not covered and may outlive the lock. That is
// the price of working on network filesystems where flock(2) is unreliable.
export const STALE_MS = 10_000;
const UPDATE_MS = 2_000;

export function lockfileBackend(dir: string, name: string): LockBackend {
  const target = `${dir}/${name}`;
  const lockPath = `${target}.lockdir`;
  let lostHandler: ((reason: string) => void) | null = null;
  let lost: string | null = null;

  const tryOnce = async (): Promise<Lock | null> => {
    let release: () => Promise<void>;
    try {
      release = await properLock(target, {
        lockfilePath: lockPath,
        realpath: false,
        stale: STALE_MS,
        update: UPDATE_MS,
        retries: 0,
        onCompromised: (error: Error) => {
          lost = `lockfile ${lockPath} was compromised: ${describe(error)}`;
          lostHandler?.(lost);
        },
      });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ELOCKED') return null;
      throw fileError('lock directory', lockPath, error);
    }
    return {
      inheritFd: null,
      commandDiesWithWrapper: true,
      onLost(handler) {
        lostHandler = handler;
        if (lost) handler(lost);
      },
      release: async () => {
        if (lost) return;
        // A lock directory that cannot be removed goes stale after STALE_MS anyway.
        await release().catch(() => {});
      },
    };
  };
  return { description: `lockfile ${lockPath} (stale after ${STALE_MS / 1000}s)`, acquire: ({ waitMs, abort }) => retryUntil(tryOnce, waitMs, abort) };
}
