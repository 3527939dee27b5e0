import { type ChildProcess, spawn } from 'node:child_process';
import { CronguardError, EXIT } from '../errors.js';
import type { Heartbeat } from '../lock/backend.js';

// The watchdog reads the command's process group id, then waits: a `done` line means
// cronguard finished normally; end of input without it means cronguard died (SIGKILL, the
// OOM killer) and its pipe closed, and then the whole group is killed. With $1 > 0 (a lease),
// a timer beside it kills the group too when no `beat` line came for $1 seconds: cronguard
// is stopped and its lease running out. The timer counts whole seconds since the last beat
// (a WINCH, which it ignores until its trap is set), and ends when the watchdog does.
const SCRIPT = `read -r group || exit 0
[ "$group" = done ] && exit 0
if [ "$1" -gt 0 ]; then
  (trap 'n=0' WINCH; n=0
   while sleep 1 && kill -0 $$ 2>/dev/null; do
     n=$((n + 1)); [ "$n" -ge "$1" ] && { kill -s KILL -- "-$group" 2>/dev/null; exit; }
   done) &
  timer=$!
fi
while read -r word; do
  case $word in
    beat) kill -s WINCH "$timer" 2>/dev/null;;
    done) [ -n "$timer" ] && kill "$timer" 2>/dev/null; exit 0;;
  esac
done
kill -s KILL -- "-$group" 2>/dev/null`;

// For locks that die with cronguard (postgres, lockfile): when cronguard dies, the next
// instance may take the lock at once, so the command's whole process group must die too,
// grandchildren included (a parent-death signal reaches only the command itself). A second
// process in a session of its own does it, so that whatever kills cronguard's group, or its
// terminal, spares it. /bin/sh is all it needs, and if it cannot start, nothing runs.
export class Watchdog {
  private readonly child: ChildProcess;
  private readonly stopBeats: () => void;

  private constructor(private readonly heartbeat: Heartbeat | null) {
    this.child = this.launch();
    this.stopBeats = heartbeat?.onBeat(() => this.child.stdin?.write('beat\n')) ?? (() => {});
  }

  // Started before the command, so that a command never runs unwatched.
  static start(heartbeat: Heartbeat | null = null): Watchdog {
    return new Watchdog(heartbeat);
  }

  watch(pgid: number): void {
    this.child.stdin?.write(`${pgid}\n`);
  }

  // The command's group is gone (or was never there): stand down.
  release(): void {
    this.stopBeats();
    this.child.stdin?.end('done\n');
  }

  private launch(): ChildProcess {
    // The timer counts whole seconds since the last beat, the one it came in included: with
    // limit + 1 it acts between limit and limit + 1 s after it, when the lease is lost to
    // cronguard already, and seconds before it is stale for the next holder.
    const seconds = this.heartbeat ? Math.ceil(this.heartbeat.limitMs / 1000) + 1 : 0;
    const child = spawn('/bin/sh', ['-c', SCRIPT, 'cronguard-watchdog', String(seconds)], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
    if (child.pid === undefined) {
      throw new CronguardError('cannot start the watchdog (/bin/sh) that ends the command with cronguard; nothing ran', EXIT.unavailable);
    }
    child.on('error', () => {});
    child.stdin?.on('error', () => {});
    return child;
  }
}
