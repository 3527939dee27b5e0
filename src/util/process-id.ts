import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';

// A pid alone does not name a process for long: pids are reused, quickly in a container.
// With the host's boot id and the process's start time (in clock ticks since boot, from
// /proc) it does, for good. Linux only; elsewhere identities are unknown (null) and
// liveness falls back to the pid.
let bootId: string | null | undefined;

function boot(): string | null {
  if (bootId === undefined) bootId = readOr('/proc/sys/kernel/random/boot_id')?.trim() ?? null;
  return bootId;
}

// "<boot id>/<start time>" of a running process, or null when it does not exist (or /proc
// cannot tell).
export function processStart(pid: number): string | null {
  const stat = readOr(`/proc/${pid}/stat`);
  const id = boot();
  if (stat === null || id === null) return null;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Field 22 of stat is the start time; the slice begins at field 3.
  return `${id}/${fields[19]}`;
}

// Whether the process recorded as `pid` (started as `start`) still runs on this host.
export function isSameProcess(pid: number, start: string | null): boolean {
  if (start !== null && boot() !== null) return processStart(pid) === start;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

let sequence = 0;

// A key no other run anywhere will have. The run log stores it under a unique constraint, so
// a record delivered twice, or delivered after its lost start did commit, stays one row. The
// process's identity (kept for whoever reads the key) is not unique on its own: containers on
// one host share the boot id, and start processes with equal pids in the same clock tick.
// 96 random bits are.
export function newRunKey(): string {
  sequence += 1;
  return `${processStart(process.pid) ?? 'unknown'}/${process.pid}/${sequence}/${randomHex(12)}`;
}

// /dev/urandom is a few reads away, where node:crypto costs milliseconds of every start.
function randomHex(bytes: number): string {
  const buffer = Buffer.alloc(bytes);
  try {
    const fd = openSync('/dev/urandom', 'r');
    try {
      readSync(fd, buffer);
    } finally {
      closeSync(fd);
    }
  } catch {
    (createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto')).randomFillSync(buffer);
  }
  return buffer.toString('hex');
}

function readOr(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}
