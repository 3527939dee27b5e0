import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { Heartbeat } from '../../src/lock/backend.js';
import { Watchdog } from '../../src/run/watchdog.js';

// A process group of its own, as the supervisor gives a command.
function group(): number {
  const child = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
  child.unref();
  return child.pid as number;
}

const alive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
};

// A lease that beats no more (cronguard stopped), renewed `sinceMs` before the watchdog starts.
const silent = (limitMs: number, sinceMs: number): Heartbeat => ({ limitMs, sinceMs: () => sinceMs, onBeat: () => () => {} });

describe('the watchdog of a lease', () => {
  it('counts its first window from the lease\'s last renewal, not from its own start', async () => {
    // Renewed 5.5 s before, with 6 s to act in (limit + 1 s): its window ends within a second.
    const late = group();
    const lateDog = Watchdog.start(silent(5000, 5500));
    lateDog.watch(late);
    // Renewed just now, 4 s: ends seconds later, unless the first counted from its own start.
    const fresh = group();
    const freshDog = Watchdog.start(silent(3000, 0));
    freshDog.watch(fresh);
    try {
      while (alive(late) && alive(fresh)) await new Promise((r) => setTimeout(r, 50));
      expect({ late: alive(late), fresh: alive(fresh) }).toEqual({ late: false, fresh: true });
      while (alive(fresh)) await new Promise((r) => setTimeout(r, 50));
    } finally {
      for (const pgid of [late, fresh]) if (alive(pgid)) process.kill(-pgid, 'SIGKILL');
      lateDog.release();
      freshDog.release();
    }
  });
});
