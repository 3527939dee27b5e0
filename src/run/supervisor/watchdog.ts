import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { CronguardError, EXIT } from '../../errors.js';
import type { Heartbeat } from '../../lock/backend.js';
import { messages } from '../../util/io.js';
import { WATCHDOG_SCRIPT } from './watchdog-script.js';

// How often cronguard looks whether its watchdog was stopped (SIGSTOP): a stopped one would
// do nothing when cronguard dies.
const CHECK_MS = 1000;

// For locks that die with cronguard (postgres, lockfile): when cronguard dies, the next
// instance may take the lock at once, so the command's whole process group must die too,
// grandchildren included (a parent-death signal reaches only the command itself). A second
// process in a session of its own does it, so that whatever kills cronguard's group, or its
// terminal, spares it. /bin/sh is all it needs, and if it cannot start, nothing runs. One
// that is killed, or stopped, is replaced at once; if none can start, the command is stopped.
// What it does, and how it finds a command whose group it was never told: WATCHDOG_SCRIPT.
export class Watchdog {
  private child: ChildProcess;
  private group: number | null = null;
  private released = false;
  private readonly stopBeats: () => void;
  private readonly check: NodeJS.Timeout;

  private constructor(private readonly heartbeat: Heartbeat | null) {
    this.child = this.adoptSpare() ?? this.launch();
    // A beat says how long ago the proof it reports was sent: the watchdog counts from then,
    // as the lease's expiry (or the lock's proof) does, not from when the reply came.
    this.stopBeats = heartbeat?.onBeat(() => this.child.stdin?.write(`beat ${Math.ceil(heartbeat.sinceMs() / 10)}\n`)) ?? (() => {});
    this.check = setInterval(() => this.replaceIfStopped(), CHECK_MS);
    this.check.unref();
  }

  // Started before the command, so that a command never runs unwatched.
  static start(heartbeat: Heartbeat | null = null): Watchdog {
    return new Watchdog(heartbeat);
  }

  watch(pgid: number): void {
    this.group = pgid;
    this.child.stdin?.write(`${pgid}\n`);
  }

  // The command's group is gone (or was never there): stand down.
  release(): void {
    this.released = true;
    clearInterval(this.check);
    this.stopBeats();
    this.child.stdin?.end('done\n');
  }

  private launch(): ChildProcess {
    // The timer looks once a second: given limit + 1 s it acts between limit + 1 and limit + 2 s
    // after the last beat, when the lease is lost to cronguard already (which stops the
    // command itself unless it is stopped too), and before the lease is free for another holder.
    const hundredths = this.heartbeat ? Math.ceil(this.heartbeat.limitMs / 10) + 100 : 0;
    const gone = this.heartbeat ? Math.ceil(this.heartbeat.sinceMs() / 10) : 0;
    const child = spawnWatchdog(hundredths, gone, this.group);
    if (child === null) {
      throw new CronguardError('cannot start the watchdog (/bin/sh) that ends the command with cronguard; nothing ran', EXIT.unavailable);
    }
    child.once('exit', () => this.replace(child));
    return child;
  }

  // The spare started while cronguard waited, if it is still alive and fits (no lease).
  private adoptSpare(): ChildProcess | null {
    const child = spare;
    spare = null;
    if (child === null || this.heartbeat !== null || child.exitCode !== null || child.signalCode !== null) {
      child?.stdin?.end('done\n');
      return null;
    }
    child.once('exit', () => this.replace(child));
    return child;
  }

  private replace(dead: ChildProcess): void {
    if (this.released || dead !== this.child) return;
    try {
      this.child = this.launch();
    } catch {
      clearInterval(this.check);
      if (this.group !== null) kill(-this.group);
      messages(false).warn('the watchdog that ends the command with cronguard died and cannot be restarted; the command was killed');
    }
  }

  // Stopped by a signal (T; not t, a tracer's brief stop): killed, with its whole group (the
  // timer beside it must not be left behind), and so replaced.
  private replaceIfStopped(): void {
    const pid = this.child.pid as number;
    let state = '';
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    } catch {
      return;
    }
    if (state === 'T') kill(-pid);
  }
}

function spawnWatchdog(hundredths: number, gone: number, group: number | null): ChildProcess | null {
  const argv = ['-c', WATCHDOG_SCRIPT, 'cronguard-watchdog', String(hundredths), String(gone), String(process.pid), ...(group === null ? [] : [String(group)])];
  // Not marked as the command is: when cronguard runs under another cronguard, the outer one's
  // watchdog, looking for its command by the mark, must not kill this one.
  const env = { ...process.env, CRONGUARD_PID: undefined };
  const child = spawn('/bin/sh', argv, { stdio: ['pipe', 'ignore', 'ignore'], detached: true, env });
  if (child.pid === undefined) return null;
  child.on('error', () => {});
  child.stdin?.on('error', () => {});
  return child;
}

let spare: ChildProcess | null = null;

// A watchdog started while cronguard waits for the database to admit the run, so that its
// spawn costs the run nothing; the command's Watchdog adopts it. If it died meanwhile, or
// none could start, the command's own is started as before. Without a command it ends.
export function prestartWatchdog(): void {
  try {
    spare ??= spawnWatchdog(0, 0, null);
  } catch {
    // The command's own start will say why, or run with a watchdog started then.
  }
}

export function discardSpareWatchdog(): void {
  spare?.stdin?.end('done\n');
  spare = null;
}

// SIGKILL to a process group that may be gone already.
function kill(target: number): void {
  try {
    process.kill(target, 'SIGKILL');
  } catch {
    // Gone: nothing left to kill.
  }
}
