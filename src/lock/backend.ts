import { sleep } from '../util/io.js';
import { monotonicMs } from '../util/time.js';

// A held lock. The supervisor never knows which backend it came from.
export interface Lock {
  // A descriptor the command must inherit so the lock lives exactly as long as the command
  // and whatever it leaves running (flock semantics); null when the wrapper keeps it alive.
  readonly inheritFd: number | null;
  // The lock dies with cronguard rather than with the command, so the command must die
  // with cronguard too, or a second instance could start beside it.
  readonly commandDiesWithWrapper: boolean;
  // Registers what to do if the lock is taken away while held (e.g. a stale lockfile).
  onLost(handler: (reason: string) => void): void;
  // Checks, now, that the lock is still held (a lease may have lapsed while cronguard was
  // stopped); a loss goes to onLost's handler, as any other. Called right before a command
  // starts under the lock and right after it ended: between the two a command runs, and a
  // lease late to renew counts itself lost (its watchdog may have acted on the lateness
  // already). Outside them, nothing runs under it, so a lease whose timers fired late (a
  // starved cronguard, a retry's delay, a loop's wait) asks its database whether it is still
  // its holder's before it counts itself lost.
  verify(moment: 'start' | 'end'): void | Promise<void>;
  // A lease that lapses unless cronguard keeps refreshing it; null for other locks.
  readonly heartbeat: Heartbeat | null;
  // What the command's environment gets from the lock (a lease's fencing token).
  readonly env?: Readonly<Record<string, string>>;
  // At most this long between the kill signal and SIGKILL when the lock is lost (a lease
  // must see its command gone before it can expire); undefined: the run path's own bound.
  readonly lossGraceMs?: number;
  // The fleet's one run per tick, kept by a lock that every host shares when their logs are
  // each their own (a Redis lock beside embedded logs): claims the run's minute for this
  // host; the host that already has it, or null. Absent: the log keeps the rule, or none does.
  claimTick?(minute: Date): Promise<string | null>;
  release(): Promise<void>;
}

// What the watchdog of a lease needs to stop the command before the lease can lapse while
// cronguard is stopped (SIGSTOP, a frozen VM): another holder could take it after that.
export interface Heartbeat {
  // How long the lease may go without a refresh before it counts as lost.
  readonly limitMs: number;
  // How long ago the last refresh was (for a watchdog that starts, or restarts, after it).
  sinceMs(): number;
  // Calls `beat` after every refresh from now on; returns what stops that.
  onBeat(beat: () => void): () => void;
}

export interface AcquireOptions {
  // 0: one attempt; otherwise keep trying until this many milliseconds have passed.
  readonly waitMs: number;
  // Stops the waiting (a signal to cronguard): the wait ends by throwing abort's reason.
  readonly abort?: AbortSignal;
}

// One lock backend: returns the held lock, or null when another holder has it.
export interface LockBackend {
  // Which lock this is and where it lives, for --verbose.
  readonly description: string;
  acquire(options: AcquireOptions): Promise<Lock | null>;
  // Local locks: who holds it now, after acquire found it held (see LocalHolder).
  holder?(): Promise<LocalHolder>;
  // A lock in a server, for a waiter (-w): a server lost once reached is waited for as a held
  // lock is, its first try's loss included; this is why the tries since found no answer (the
  // wait ends in it, 69), null when the last one reached the server.
  outOfReach?(): Error | null;
}

// Where a local lock's files live. `gid`: the group the directory shares them with (see
// sharing.ts); `managed`: the directory is cronguard's own default one, whose existing files
// cronguard may tighten (and root take over); in a directory the user named, an existing
// file is never changed, whoever owns it.
export interface LockPlace {
  readonly gid: number | null;
  readonly managed: boolean;
}

// The holder of a local lock: the pid that took it (from /proc/locks, or the lease), so a
// skip is counted on its run even when only what that run left behind still holds the lock;
// and, when the holder is a process of a user who does not share the job, who that is.
export interface LocalHolder {
  readonly pid: number | null;
  readonly stranger: string | null;
}

const FIRST_DELAY_MS = 25;
const MAX_DELAY_MS = 250;

// Retries a non-blocking acquisition until it succeeds or `waitMs` runs out. Polling (rather
// than a blocking call on a worker thread) keeps the deadline exact and the process killable;
// the monotonic clock keeps it a duration when the wall clock is stepped (NTP).
export async function retryUntil<T>(attempt: () => Promise<T | null> | T | null, waitMs: number, abort?: AbortSignal): Promise<T | null> {
  const deadline = monotonicMs() + waitMs;
  let delay = FIRST_DELAY_MS;
  for (;;) {
    abort?.throwIfAborted();
    const held = await attempt();
    if (held !== null) return held;
    const left = deadline - monotonicMs();
    if (left <= 0) return null;
    await sleep(Math.min(delay, left), abort);
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  }
}
