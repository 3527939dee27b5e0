import { closeSync, constants, fstatSync, lstatSync, openSync, readFileSync, realpathSync, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import { CantCreateError, fileError, PermissionError, UsageError } from '../errors.js';
import { mkdirp } from './io.js';
import { euid, inGroup, isSharedPath, isSticky, makeRootDir, notShared, sharedWithMe, sharingGid } from './sharing.js';

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
// Never follow a link planted in place of the file, never block on a FIFO, never become
// the controlling terminal.
const FILE_FLAGS = constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;

// Opens `name` inside `dir` the way openat(2) would: the directory is opened once (itself
// not a symlink) and the file is created relative to that descriptor, so swapping the
// directory for a link after it was checked changes nothing. Only a regular file is
// accepted. Returns the open descriptor; a failure keeps the system error as its `cause`.
export function openInDirectory(dir: string, name: string, flags: number, what: string, mode = 0o644): number {
  let dirFd: number;
  try {
    dirFd = openSync(dir, DIR_FLAGS);
  } catch (error) {
    throw Object.assign(fileError(`${what} directory`, dir, error), { cause: error });
  }
  try {
    return openRegular(`/proc/self/fd/${dirFd}/${name}`, flags, what, `${dir}/${name}`, mode);
  } finally {
    closeSync(dirFd);
  }
}

// Creates `name` inside `dir` (as openInDirectory) only if it does not exist yet; null if it
// does (whatever it is: a symlink planted there counts). O_EXCL makes this the one atomic
// test-and-set a plain file system offers.
export function createExclusive(dir: string, name: string, what: string, mode = 0o644, flags = 0): number | null {
  try {
    return openInDirectory(dir, name, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | flags, what, mode);
  } catch (error) {
    if ((error as { cause?: NodeJS.ErrnoException }).cause?.code === 'EEXIST') return null;
    throw error;
  }
}

// Opens a file by its path, refusing a symlink in its last component and anything that is
// not a regular file (a FIFO would hang us in open(2) without O_NONBLOCK).
export function openRegular(path: string, flags: number, what: string, shown = path, mode = 0o644): number {
  let fd: number;
  try {
    fd = openSync(path, flags | FILE_FLAGS, mode);
  } catch (error) {
    throw Object.assign(fileError(what, shown, error), { cause: error });
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new CantCreateError(`${what} ${shown} is not a regular file; remove it or choose another path`);
  }
  return fd;
}

// Makes a directory of cronguard's own files (state, locks) when missing, and checks it as
// checkPrivateDirectory does. Root's shared directories are made for the group (see
// sharing.ts); a member cannot make them, and is told who can. Returns the sharing group.
export function preparePrivateDirectory(dir: string, what: string): number | null {
  if (isSharedPath(dir) && euid() === 0) makeRootDir(dir, what);
  else if (!isSharedPath(dir)) mkdirp(dir, 0o700);
  else if (!existsNoFollow(dir)) throw new CantCreateError(notShared(dir, what, false));
  else if (!sharedWithMe(lstatSync(dir))) throw new PermissionError(notShared(dir, what, true));
  return checkPrivateDirectory(dir, what);
}

function existsNoFollow(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

// A directory only this user can write to (not a symlink, owned by us, not writable by
// group or others), or root's directory shared with a group this user is in, which must be
// setgid and sticky (see sharing.ts): a member may change only what it made there. For root
// also every directory above it, up to /: a user who can write to any of them could swap
// the directory for a link between the check and the open (the SQLite run log is opened by
// path). Stricter than needed for an unprivileged user's own files, so checked for root
// only; the others need only own the directory. Returns the group it is shared with, or null.
export function checkPrivateDirectory(dir: string, what: string): number | null {
  const uid = euid();
  const stat = lstatOf(dir, what);
  if (stat.isSymbolicLink()) throw new CantCreateError(`${what} ${dir} is a symbolic link; give the real directory`);
  if (!stat.isDirectory()) throw new CantCreateError(`${what} ${dir} is not a directory`);
  const group = sharingGid(stat);
  const shared = group !== null && stat.uid === 0 && isSticky(stat) && (uid === 0 || inGroup(group)) ? group : null;
  if (shared === null && stat.uid !== uid) throw new PermissionError(`${what} ${dir} belongs to another user (uid ${stat.uid}); refusing to use it`);
  if (shared === null && stat.mode & 0o022) throw new PermissionError(`${what} ${dir} is writable by other users (mode ${(stat.mode & 0o7777).toString(8)}); chmod go-w it`);
  if (uid !== 0) return shared;
  // The real path: a symlink's own mode means nothing, what it points to does.
  const passed: string[] = [];
  for (let parent = dirname(realpathSync.native(dir)); !safeAbove.has(parent); parent = dirname(parent)) {
    const above = lstatOf(parent, what);
    const othersWrite = (above.mode & 0o022) !== 0 && (above.mode & 0o1000) === 0;
    if ((above.uid !== 0 && above.uid !== uid) || othersWrite) {
      throw new PermissionError(`${what} ${dir} is inside ${parent}, which another user can change (uid ${above.uid}, mode ${(above.mode & 0o7777).toString(8)}); choose a directory only root controls`);
    }
    passed.push(parent);
    if (parent === dirname(parent)) break;
  }
  for (const parent of passed) safeAbove.add(parent);
  return shared;
}

// The directories above a checked one that passed (real paths, each with all those above
// it): only root can change such a directory, so each is checked once per process. A run
// checks its state directory's tree four times (the log, the spool, its known/ entry).
const safeAbove = new Set<string>();

function lstatOf(path: string, what: string): Stats {
  try {
    return lstatSync(path);
  } catch (error) {
    throw fileError(what, path, error);
  }
}

// Reads a small text file a user named (a configuration file, a certificate): a FIFO, a
// device or a directory is refused rather than read forever, and so is anything over
// `maxBytes`. A missing file or a wrong type is a usage error; no permission is 77.
// `noFollow`: a symbolic link is refused too; `trust` sees the file as opened, and may refuse it.
export function readRegularFile(
  path: string,
  what: string,
  maxBytes = 1024 * 1024,
  options: { readonly noFollow?: boolean; readonly trust?: (stat: Stats) => void } = {},
): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY | (options.noFollow ? constants.O_NOFOLLOW : 0));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') throw new PermissionError(`${what}: permission denied on ${path}`);
    if (code === 'ELOOP') throw new UsageError(`${what}: ${path} is a symbolic link; give the file itself`);
    throw new UsageError(`${what}: cannot read ${path} (${code === 'ENOENT' ? 'it does not exist' : code})`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new UsageError(`${what}: ${path} is not a regular file`);
    if (stat.size > maxBytes) throw new UsageError(`${what}: ${path} is larger than ${maxBytes} bytes`);
    options.trust?.(stat);
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}
