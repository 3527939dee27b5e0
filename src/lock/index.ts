import { lstatSync, readlinkSync, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import { CantCreateError, CronguardError, fileError, PermissionError } from '../errors.js';
import { type Messages, mkdirp } from '../util/io.js';
import { euid, isSharedPath, makeRootDir, notShared, sharedWithMe, sharingGid } from '../util/sharing.js';
import type { Lock, LockBackend } from './backend.js';
import { flockBackend } from './flock.js';
import type { LockSpec } from './lock-spec.js';

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

// The locks of this machine, each prepared by its kind; the lockfile backend is loaded only
// when used. A lock of the fleet's database is taken by its admission statement (run/gate/).
export async function openLockBackend(spec: LockSpec, say: Messages): Promise<LockBackend> {
  switch (spec.kind) {
    case 'advisory':
    case 'named':
    case 'lease':
      throw new Error(`the ${spec.kind} lock is taken by the run log's admission; src/run/gate/gate.ts builds it`);
    case 'redis':
      throw new Error('the redis lock is opened by its gate (src/run/gate/open.ts), with its client');
    case 'none':
      return noLock;
    case 'lockfile': {
      const gid = ensureLockDir(spec.dir.path, spec.dir.isDefault);
      const { lockfileBackend } = await import('./lockfile.js');
      return lockfileBackend(spec.dir.path, spec.job, { gid, managed: spec.dir.isDefault });
    }
    case 'flock': {
      const gid = spec.dir !== null ? ensureLockDir(spec.dir.path, spec.dir.isDefault) : parentSharingGid(spec.path);
      return flockBackend(spec.path, { gid, inLockDir: spec.dir !== null, managed: spec.dir?.isDefault === true }, say);
    }
  }
}

export type { Lock, LockBackend };

// Makes sure a lock directory exists and is safe to create lock files in; returns the group
// it shares its lock files with (see sharing.ts), or null. A symlink is refused because a
// lock dir swapped for a link would let another user steer where we create files; a default
// directory must also belong to us, or be root's shared one with us in its group: root's
// /run/lock/cronguard sits in a directory anyone may create in, and a user who made it
// first would control root's locks. Directories cronguard makes are private (0700), but
// root's shared one, made for the group when it exists.
export function ensureLockDir(dir: string, isDefault: boolean): number | null {
  let stat: Stats | null;
  try {
    stat = preparedOrMissing(dir);
  } catch (error) {
    throw error instanceof CronguardError ? error : fileError('lock directory', dir, error);
  }
  // Made, and gone or swapped at once: someone else has a hand in this directory.
  if (!stat) throw new CantCreateError(`lock directory ${dir} vanished as it was created`);
  if (stat.isSymbolicLink()) {
    const target = linkTarget(dir);
    throw new CantCreateError(`lock directory ${dir} is a symbolic link${target === null ? '' : ` (to ${target})`}; give the real directory with --lock-dir`);
  }
  if (!stat.isDirectory()) throw new CantCreateError(`lock directory ${dir} is not a directory`);
  if (isDefault && stat.uid !== euid() && !sharedWithMe(stat)) {
    if (isSharedPath(dir)) throw new PermissionError(notShared(dir, 'lock directory', true));
    throw new PermissionError(`lock directory ${dir} belongs to another user (uid ${stat.uid})`);
  }
  return sharingGid(stat);
}

function preparedOrMissing(dir: string): Stats | null {
  if (isSharedPath(dir) && euid() === 0) makeRootDir(dir, 'lock directory');
  const stat = lstatOrNull(dir);
  if (stat) return stat;
  if (isSharedPath(dir)) throw new CantCreateError(notShared(dir, 'lock directory', false));
  mkdirp(dir, 0o700);
  return lstatOrNull(dir);
}

// The group a --lock-file's directory shares its files with, if any.
function parentSharingGid(path: string): number | null {
  const stat = lstatOrNull(dirname(path));
  return stat?.isDirectory() ? sharingGid(stat) : null;
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
