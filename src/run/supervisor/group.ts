import { readdirSync, readFileSync } from 'node:fs';
import { setLongTimeout, sleep } from '../../util/io.js';
import { monotonicMs } from '../../util/time.js';

const POLL_MS = 20;
// After SIGKILL, members normally vanish at once; this bounds the wait for zombies that an
// init process which does not reap would leave behind.
const AFTER_KILL_MS = 1000;

// The command's process group (its pid is the group id, as it was spawned detached).
export class ProcessGroup {
  stopping = false;
  escalated = false;
  private killTimer: { clear(): void } | null = null;
  private sent: NodeJS.Signals | null = null;

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

  // Sends the kill signal (or the one a stop asked for) to every member, then SIGKILL to
  // whatever is left after kill-after (or a shorter grace, when waiting is unsafe). A group
  // already stopping gets only a signal it was not sent yet (a stop's KILL after its TERM).
  stop(graceMs = this.killAfterMs, signal = this.killSignal): void {
    if (this.stopping) {
      if (signal !== this.sent) this.signal(signal);
      return;
    }
    this.stopping = true;
    this.sent = signal;
    this.signal(signal);
    this.killTimer = setLongTimeout(() => {
      this.escalated = true;
      this.signal('SIGKILL');
    }, graceMs);
  }

  // Once the group has been stopped, waits until no member is left, so a timeout or lock
  // loss never leaves grandchildren running (and holding the lock) behind cronguard's back.
  async waitUntilGone(): Promise<void> {
    if (!this.stopping) return;
    let killedAt: number | null = null;
    while (this.hasLiveMembers()) {
      if (this.escalated) {
        killedAt ??= monotonicMs();
        if (monotonicMs() - killedAt > AFTER_KILL_MS) break;
      }
      await sleep(POLL_MS);
    }
    this.killTimer?.clear();
  }

  // kill(-pgid, 0) also succeeds for zombies, which linger when the machine's init is slow
  // to reap orphans; on Linux, /proc tells the living from the dead.
  private hasLiveMembers(): boolean {
    return this.signal(0) && this.liveMembers() !== null;
  }

  // The group's living members as "pid 123 (sleep)", or null when there are none; an empty
  // list when /proc cannot be read (members may live, unnamed).
  liveMembers(): string[] | null {
    if (!this.signal(0)) return null;
    let pids: string[];
    try {
      pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
    } catch {
      return [];
    }
    const members = pids.flatMap((pid) => {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      } catch {
        return [];
      }
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const live = Number(pgrp) === this.pgid && state !== 'Z' && state !== 'X';
      return live ? [`pid ${pid} (${stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))})`] : [];
    });
    return members.length > 0 ? members : null;
  }
}
