import { monotonicMs } from '../../util/time.js';
import { isBusy } from './errors.js';

// The embedded log's file is written by every cronguard of its user, and a writer can be
// stopped or stalled in the middle of a write (SIGSTOP, a frozen container, a starved
// machine), the file locked meanwhile. SQLite waits for a locked file by sleeping inside
// the call, and that stops the whole process: a lockfile lease's refresh, the timeout, the
// signal handlers, the watchdog's beats. So the connection's own wait is short, enough for
// another run's transaction of a millisecond or two, and a longer one goes on here, between
// turns of the event loop, for as long as SQLite alone used to wait.
export const SYNC_WAIT_MS = 50;
const BUSY_WAIT_MS = 10_000;
const FIRST_PAUSE_MS = 10;
const LAST_PAUSE_MS = 250;

// fn again, after a growing pause, while the file is busy and BUSY_WAIT_MS have not passed.
export async function patiently<T>(fn: () => T | Promise<T>): Promise<T> {
  const giveUp = monotonicMs() + BUSY_WAIT_MS;
  for (let pause = FIRST_PAUSE_MS; ; pause = Math.min(pause * 2, LAST_PAUSE_MS)) {
    try {
      return await fn();
    } catch (error) {
      if (!isBusy(error) || monotonicMs() >= giveUp) throw error;
    }
    // Jittered, so that writers that found it busy together do not come back together.
    await new Promise((resolve) => setTimeout(resolve, pause * (0.5 + Math.random())));
  }
}

// Every method of `store` retried while the file is busy, but those in `own`, which retry
// their statements themselves. A statement that finds the file busy has written nothing (it
// could not take the write lock), and what a method wrote before it (an import's row, found
// again by its run key) stands when it runs again.
export function patientStore<T extends object>(store: T, own: readonly (keyof T)[]): T {
  return new Proxy(store, {
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (typeof value !== 'function' || own.includes(key as keyof T)) return value;
      return (...args: unknown[]) => patiently(() => (value as (...a: unknown[]) => unknown).apply(target, args));
    },
  });
}
