import { closeSync, constants, lstatSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { openRegular } from '../util/safe-path.js';
import type { LocalHolder } from './backend.js';
import { epochPath, highestEpoch, isFresh } from './lockfile-epochs.js';
import { slotFile } from './slots.js';
import { strangerHolding } from './stranger.js';

// Who holds the lock at `path` (see LocalHolder); `gid`: the group it is shared with.
export function localHolder(lock: 'flock' | 'lockfile', path: string, gid: number | null): LocalHolder {
  const pid = new LocalLocks().holder(lock, path) ?? null;
  const owner = lock === 'lockfile' ? leaseOwner(path) : undefined;
  return { pid, stranger: owner === null ? null : strangerHolding(path, pid, gid, owner) };
}

// The user who made a lockfile lease's highest epoch; null when there is none.
function leaseOwner(container: string): number | null {
  try {
    return lstatSync(epochPath(container, highestEpoch(container))).uid;
  } catch {
    return null;
  }
}

export interface LocalLock {
  readonly job: string;
  readonly lock: 'flock' | 'lockfile';
  // The slot of the job's lock it is (--max-running; 0: the job's own lock).
  readonly slot: number;
  readonly path: string;
  readonly holder: number | null;
}

// The locks held on this host, read without taking any: flock(2) locks from /proc/locks (so
// looking can never make a starting job skip), lockfile directories by their freshness.
export class LocalLocks {
  private flocks: Map<string, number> | null = null;

  // The pid holding the lock at `path` (null when that cannot be told), or undefined: not held.
  holder(backend: string, path: string): number | null | undefined {
    if (backend === 'lockfile') return leaseHolder(path);
    if (backend !== 'flock') return undefined;
    try {
      // The lock file itself, never what a link in its place points to.
      const { dev, ino } = lstatSync(path, { bigint: true });
      const major = Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn));
      const minor = Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn));
      return this.heldFlocks().get(`${major}:${minor}:${ino}`);
    } catch {
      return undefined;
    }
  }

  // Held lock files and fresh lock directories in a lock dir, named after their jobs (and
  // slots: lock/slots.ts).
  inDirectory(dir: string): LocalLock[] {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return [];
    }
    const held: LocalLock[] = [];
    for (const name of names) {
      const file = slotFile(name);
      if (!file) continue;
      const path = join(dir, name);
      const holder = this.holder(file.lock, path);
      if (holder !== undefined) held.push({ ...file, path, holder });
    }
    return held;
  }

  private heldFlocks(): Map<string, number> {
    if (this.flocks) return this.flocks;
    this.flocks = new Map();
    let text = '';
    try {
      text = readFileSync('/proc/locks', 'utf8');
    } catch {
      return this.flocks;
    }
    for (const line of text.split('\n')) {
      const m = /^\d+:\s+FLOCK\s+\S+\s+\S+\s+(\d+)\s+([0-9a-f]+):([0-9a-f]+):(\d+)/.exec(line);
      if (m) this.flocks.set(`${Number.parseInt(m[2] as string, 16)}:${Number.parseInt(m[3] as string, 16)}:${m[4]}`, Number(m[1]));
    }
    return this.flocks;
  }
}

// A lockfile lease is held when its highest epoch is fresh; the epoch names its holder. It
// is read like any lock file (O_NOFOLLOW, O_NONBLOCK, regular files only): a FIFO planted
// as an epoch would otherwise hang `cronguard locks` and every skipping run in open(2).
function leaseHolder(container: string): number | null | undefined {
  try {
    if (!lstatSync(container).isDirectory()) return undefined;
    const epoch = highestEpoch(container);
    const path = epochPath(container, epoch);
    if (epoch === 0n || !isFresh(path)) return undefined;
    const fd = openRegular(path, constants.O_RDONLY, 'lock file');
    const head = Buffer.alloc(256);
    let length: number;
    try {
      length = readSync(fd, head);
    } finally {
      closeSync(fd);
    }
    // "host pid": a pid of another host (the lease is on NFS) means nothing here.
    const [host, text] = head.subarray(0, length).toString().trim().split(' ');
    const pid = Number(text);
    return host === hostname() && Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return undefined;
  }
}
