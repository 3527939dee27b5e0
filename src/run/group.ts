import { readdirSync, readFileSync } from 'node:fs';
import { setLongTimeout, sleep } from '../util/io.js';

const POLL_MS = 20;
// After SIGKILL, members normally vanish at once; this bounds the wait for zombies that an
// init process which does not reap would leave behind.
const AFTER_KILL_MS = 1000;

// The command's process group (its pid is the group id, as it was spawned detached).
export class ProcessGroup {
  stopping = false;
  escalated = false;
  private killTimer: { clear(): void } | null = null;

  constructor(
    private readonly pgid: number | null,
    private readonly killSignal: NodeJS.Signals,
    private readonly killAfterMs: number,
  ) {}

  signal(signal: NodeJS.Signals | 0): boolean {
    if (this.pgid === null) return false;
    try {
      process.kill(-this.pgid, signal);
      return true;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }

  // Sends the kill signal to every member, then SIGKILL to whatever is left after kill-after.
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.signal(this.killSignal);
    this.killTimer = setLongTimeout(() => {
      this.escalated = true;
      this.signal('SIGKILL');
    }, this.killAfterMs);
  }

  // Once the group has been stopped, waits until no member is left, so a timeout or lock
  // loss never leaves grandchildren running (and holding the lock) behind cronguard's back.
  async waitUntilGone(): Promise<void> {
    if (!this.stopping) return;
    let killedAt: number | null = null;
    while (this.hasLiveMembers()) {
      if (this.escalated) {
        killedAt ??= Date.now();
        if (Date.now() - killedAt > AFTER_KILL_MS) break;
      }
      await sleep(POLL_MS);
    }
    this.killTimer?.clear();
  }

  // kill(-pgid, 0) also succeeds for zombies, which linger when the machine's init is slow
  // to reap orphans; on Linux, /proc tells the living from the dead.
  private hasLiveMembers(): boolean {
    if (!this.signal(0)) return false;
    let pids: string[];
    try {
      pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
    } catch {
      return true;
    }
    return pids.some((pid) => {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      } catch {
        return false;
      }
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return Number(pgrp) === this.pgid && state !== 'Z' && state !== 'X';
    });
  }
}
