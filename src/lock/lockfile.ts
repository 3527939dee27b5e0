import { closeSync, constants, fchmodSync, fchownSync, fstatSync, lutimesSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { CantCreateError, CronguardError, fileError } from '../errors.js';
import { createExclusive } from '../util/safe-path.js';
import { euid, fileMode, settleFile, stillNamed } from '../util/sharing.js';
import { unlinkQuietly } from '../util/stamp.js';
import { monotonicMs } from '../util/time.js';
import { type Lock, type LockBackend, type LockPlace, retryUntil } from './backend.js';
import { epochName, epochPath, highestEpoch, isFresh, STALE_MS } from './lockfile-epochs.js';

// A lease for file systems where flock(2) cannot be trusted (NFS): the holder refreshes it
// every UPDATE_MS; one not refreshed for STALE_MS was abandoned and may be taken over. Its
// holder counts it lost once it went LAPSE_MS without a refresh (cronguard was stopped or
// stalled), and so does the command's watchdog, which stops the command then: well before
// another waiter may take the lease over.
const UPDATE_MS = 1_000;
const LAPSE_MS = 5_000;

// The lock is a directory of numbered epoch files; the highest one is the lease. Taking the
// lock means creating the next epoch with O_EXCL, which exactly one of any number of racing
// waiters can do, so a stale lease is taken over atomically (proper-lockfile removed and
// re-created it, and several waiters could each do so). Epochs are never removed on release
// (the lease is made stale instead), so their number only grows, and a winner checks that
// nothing overtook it. Like any lease, it dies with the wrapper: the command gets a watchdog
// (the supervisor) that also wants the lease's heartbeats, and a holder that stalls for
// LAPSE_MS loses the lock (exit 75).
// The container and its epochs are private to their owner, or shared with the group `gid`
// of a shared lock directory, like flock's lock files.
export function lockfileBackend(dir: string, name: string, { gid, managed }: LockPlace): LockBackend {
  const container = `${dir}/${name}.lockdir`;
  const tryOnce = (): Lock | null => {
    makeContainer(container, gid, managed);
    const latest = highestEpoch(container);
    if (latest > 0n && isFresh(epochPath(container, latest))) return null;
    const mine = latest + 1n;
    const fd = createExclusive(container, epochName(mine), 'lock file', fileMode(gid));
    if (fd === null) return null;
    try {
      settleFile(fd, gid, epochPath(container, mine), 'lock file');
      writeSync(fd, `${hostname()} ${process.pid}\n`);
    } finally {
      closeSync(fd);
    }
    if (highestEpoch(container) !== mine) return null;
    // A few predecessors go; ours is above all of them, whatever their size. unlink(2) never
    // follows a link, and leaves alone a directory someone put in an epoch's place.
    for (let old = latest; old > 0n && old > latest - 5n; old--) unlinkQuietly(epochPath(container, old));
    return hold(container, mine);
  };
  return {
    description: `lockfile ${container} (stale after ${STALE_MS / 1000}s)`,
    acquire: ({ waitMs, abort }) => retryUntil(tryOnce, waitMs, abort),
    holder: async () => (await import('./held.js')).localHolder('lockfile', container, gid),
  };
}

function hold(container: string, epoch: bigint): Lock {
  const path = epochPath(container, epoch);
  let lostHandler: ((reason: string) => void) | null = null;
  let lost: string | null = null;
  // Monotonic: a wall clock set back or forward is no stall.
  let refreshedAt = monotonicMs();
  const beats = new Set<() => void>();
  const lapsed = (gap: number) => `lockfile ${container}: the lease lapsed, not refreshed for ${(gap / 1000).toFixed(1)}s (cronguard was stopped or stalled)`;
  const refresh = () => {
    if (lost) return;
    const checkedAt = monotonicMs();
    const gap = checkedAt - refreshedAt;
    try {
      if (gap >= LAPSE_MS) {
        lost = lapsed(gap);
      } else {
        const highest = highestEpoch(container);
        if (highest !== epoch) throw new Error(`epoch ${highest} overtook ours (${epoch})`);
        const now = new Date();
        lutimesSync(path, now, now);
        // The lease is proven as of the epochs' reading, and only if cronguard was not
        // stopped between that and the touch: a waiter may have taken it over meanwhile.
        const after = monotonicMs() - refreshedAt;
        if (after >= LAPSE_MS) {
          lost = lapsed(after);
        } else {
          refreshedAt = checkedAt;
          for (const beat of beats) beat();
          return;
        }
      }
    } catch (error) {
      lost = `lockfile ${container} was taken over: ${(error as Error).message}`;
    }
    clearInterval(timer);
    lostHandler?.(lost);
  };
  const timer = setInterval(refresh, UPDATE_MS);
  timer.unref();
  return {
    inheritFd: null,
    commandDiesWithWrapper: true,
    onLost(handler) {
      lostHandler = handler;
      if (lost) handler(lost);
    },
    verify: refresh,
    heartbeat: {
      limitMs: LAPSE_MS,
      sinceMs: () => monotonicMs() - refreshedAt,
      onBeat(beat) {
        beats.add(beat);
        return () => beats.delete(beat);
      },
    },
    release: async () => {
      clearInterval(timer);
      beats.clear();
      // Stale at once: the next waiter takes the next epoch. Removing it would let the
      // highest epoch go down, and a slow waiter reuse a number. If that fails, the lease
      // goes stale after STALE_MS all the same.
      if (lost) return;
      try {
        lutimesSync(path, new Date(0), new Date(0));
      } catch {
        // See above: stale soon anyway.
      }
    },
  };
}

// Made 0700, or 3770 in a shared directory: every member makes epochs in it, and the
// sticky bit keeps each from removing another's. In cronguard's own lock directory root
// takes over one a member made, and checks that the name still leads to it; all through the
// directory's own descriptor.
function makeContainer(container: string, gid: number | null, managed: boolean): void {
  let created = false;
  try {
    mkdirSync(container, 0o700);
    created = true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw fileError('lock directory', container, error);
  }
  let fd: number;
  try {
    fd = openSync(container, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    throw fileError('lock directory', container, error);
  }
  try {
    const stat = fstatSync(fd);
    const mode = gid === null ? 0o700 : 0o3770;
    let mine = stat.uid === euid();
    if (!mine && managed && gid !== null && euid() === 0) {
      fchownSync(fd, 0, gid);
      if (!stillNamed(fd, container)) throw new CantCreateError(`lock directory ${container} was replaced while cronguard took it over; try again`);
      mine = true;
    }
    // An existing one is changed only in cronguard's own lock directory.
    if (mine && (created || managed) && (stat.mode & 0o7777) !== mode) fchmodSync(fd, mode);
  } catch (error) {
    throw error instanceof CronguardError ? error : fileError('lock directory', container, error);
  } finally {
    closeSync(fd);
  }
}
