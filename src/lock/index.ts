import { lstatSync, readlinkSync, type Stats } from 'node:fs';
import type { RunConfig } from '../cli/config.js';
import { CantCreateError, fileError, PermissionError } from '../errors.js';
import { mkdirp } from '../util/io.js';
import type { Lock, LockBackend } from './backend.js';
import { flockBackend } from './flock.js';

// The "none" backend: every invocation runs. Still a Lock, so the run path has one shape.
const noLock: LockBackend = {
  description: 'no lock',
  acquire: async () => ({
    inheritFd: null,
    commandDiesWithWrapper: false,
    onLost: () => {},
    verify: () => {},
    heartbeat: null,
    release: async () => {},
  }),
};

// Picks and prepares a local backend; the lockfile backend is loaded only when used. The
// postgres backend needs a session and is wired up by the run path (src/run/wiring.ts).
export async function openLockBackend(config: RunConfig): Promise<LockBackend> {
  switch (config.lock) {
    case 'none':
      return noLock;
    case 'postgres':
      throw new Error('the postgres lock needs a session; src/run/wiring.ts builds it');
    case 'lockfile': {
      const dir = config.lockDir as string;
      ensureLockDir(dir, config.lockDirDefault);
      const { lockfileBackend } = await import('./lockfile.js');
      return lockfileBackend(dir, config.name);
    }
    case 'flock':
      if (config.lockDir !== null) ensureLockDir(config.lockDir, config.lockDirDefault);
      return flockBackend(config.lockPath, config.lockDir !== null);
  }
}

export type { Lock, LockBackend };

// Makes sure a lock directory exists and is safe to create lock files in. A symlink is
// refused because a lock dir swapped for a link would let another user steer where we create
// files; a default directory must also belong to us: root's /run/lock/cronguard sits in a
// directory anyone may create in, and a user who made it first would control root's locks.
// A user's default directory is private (0700); root's and any chosen one are 0755, so
// users who share a job can share its lock files.
export function ensureLockDir(dir: string, isDefault: boolean): void {
  const privateDir = isDefault && process.geteuid?.() !== 0;
  let stat = lstatOrNull(dir);
  if (!stat) {
    try {
      mkdirp(dir, privateDir ? 0o700 : 0o755);
    } catch (error) {
      throw fileError('lock directory', dir, error);
    }
    stat = lstatOrNull(dir);
    // Made, and gone or swapped at once: someone else has a hand in this directory.
    if (!stat) throw new CantCreateError(`lock directory ${dir} vanished as it was created`);
  }
  if (stat.isSymbolicLink()) {
    const target = linkTarget(dir);
    throw new CantCreateError(`lock directory ${dir} is a symbolic link${target === null ? '' : ` (to ${target})`}; give the real directory with --lock-dir`);
  }
  if (!stat.isDirectory()) throw new CantCreateError(`lock directory ${dir} is not a directory`);
  if (isDefault && stat.uid !== process.geteuid?.()) {
    throw new PermissionError(`lock directory ${dir} belongs to another user (uid ${stat.uid})`);
  }
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw fileError('lock directory', path, error);
  }
}

// Where a link points, for a message; null when it was swapped away since the lstat.
function linkTarget(path: string): string | null {
  try {
    return readlinkSync(path);
  } catch {
    return null;
  }
}
