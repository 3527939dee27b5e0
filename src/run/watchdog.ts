import { type ChildProcess, spawn } from 'node:child_process';
import { CronguardError, EXIT } from '../errors.js';

// The watchdog reads the command's process group id, then waits: a `done` line means
// cronguard finished normally; end of input without it means cronguard died (SIGKILL, the
// OOM killer) and its pipe closed, and then the whole group is killed.
const SCRIPT =
  'read -r group || exit 0; [ "$group" = done ] && exit 0; read -r word; [ "$word" = done ] || kill -s KILL -- "-$group" 2>/dev/null';

// For locks that die with cronguard (postgres, lockfile): when cronguard dies, the next
// instance may take the lock at once, so the command's whole process group must die too,
// grandchildren included (a parent-death signal reaches only the command itself). A second
// process in a session of its own does it, so that whatever kills cronguard's group, or its
// terminal, spares it. /bin/sh is all it needs, and if it cannot start, nothing runs.
export class Watchdog {
  private constructor(private readonly process: ChildProcess) {}

  // Started before the command, so that a command never runs unwatched.
  static start(): Watchdog {
    const child = spawn('/bin/sh', ['-c', SCRIPT], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
    if (child.pid === undefined) {
      throw new CronguardError('cannot start the watchdog (/bin/sh) that ends the command with cronguard; nothing ran', EXIT.unavailable);
    }
    child.on('error', () => {});
    child.stdin?.on('error', () => {});
    return new Watchdog(child);
  }

  watch(pgid: number): void {
    this.process.stdin?.write(`${pgid}\n`);
  }

  // The command's group is gone (or was never there): stand down.
  release(): void {
    this.process.stdin?.end('done\n');
  }
}
