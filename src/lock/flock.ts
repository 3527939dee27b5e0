import { closeSync, constants, fstatSync, type Stats, statSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { CantCreateError, CronguardError, fileError, PermissionError } from '../errors.js';
import { loadAddon } from '../util/addon.js';
import type { Messages } from '../util/io.js';
import { openInDirectory, openRegular } from '../util/safe-path.js';
import { describeUser, euid, fileMode, settleFile, stillNamed } from '../util/sharing.js';
import { type Lock, type LockBackend, type LockPlace, retryUntil } from './backend.js';

// fs-ext's addon itself (its fs-ext.js only maps 'exnb' to these flags).
type FsExtBinding = { flock(fd: number, operation: number): void; constants: { LOCK_EX: number; LOCK_NB: number } };

// O_RDONLY is enough for flock(2), so users who share a lock file only need read access;
// no O_TRUNC, ever. (No symlink, FIFO or other non-regular file is opened: safe-path.)
const OPEN_FLAGS = constants.O_RDONLY | constants.O_CREAT;

// flock(2) on a file, exactly like util-linux `flock -n PATH`: the descriptor is handed to
// the command, so the lock is held for as long as the command or anything it started lives.
// `inLockDir`: the file lives in a lock directory cronguard checked, and is opened relative
// to it; otherwise (--lock-file) by its path. Anyone who can open a lock file can hold it,
// and every run would skip: it is created readable by its owner alone, or by the group
// `gid` its directory shares it with; an older, looser one in cronguard's own (`managed`)
// lock directory is tightened before it is locked. A file the user pointed at (--lock-file,
// --lock-dir) is never changed: util-linux flock locks /etc/passwd as readily; it is only
// reported when anyone can open it.
export function flockBackend(path: string, place: LockPlace & { readonly inLockDir: boolean }, say: Messages): LockBackend {
  const { gid, inLockDir, managed } = place;
  const binding = loadAddon<FsExtBinding>('fs-ext', 'build/Release/fs_ext.node');
  const exclusiveNow = binding.constants.LOCK_EX | binding.constants.LOCK_NB;
  const mode = fileMode(gid);
  const opened = inLockDir
    ? () => openInDirectory(dirname(path), basename(path), OPEN_FLAGS, 'lock file', mode)
    : () => openRegular(path, OPEN_FLAGS, 'lock file', path, mode);
  // Root takes over what a member made in its shared directory (see settleFile), and then
  // makes sure the name still leads to it: renamed away before that, it would lock a file
  // nobody else finds.
  const takeOver = managed && gid !== null && euid() === 0;
  let warned = false;
  const open = (): number => {
    for (let tries = 1; ; tries++) {
      const fd = inLockDir ? opened() : withSharingHint(opened, path);
      try {
        const stat = managed ? settleFile(fd, gid, path, 'lock file', takeOver) : fstatSync(fd);
        if (takeOver && !stillNamed(fd, path)) {
          if (tries < 3) {
            closeSync(fd);
            continue;
          }
          throw new CantCreateError(`lock file ${path} keeps being replaced by another user; see who can write to ${dirname(path)}`);
        }
        if ((stat.mode & 0o006) !== 0 && !warned) {
          warned = true;
          say.warn(`lock file ${path} belongs to ${describeUser(stat.uid)} and any user can open it (mode ${(stat.mode & 0o777).toString(8)}), so anyone could hold this job's lock and make it skip; its owner should chmod o-rw it`);
        }
        return fd;
      } catch (error) {
        closeSync(fd);
        throw error instanceof CronguardError ? error : fileError('lock file', path, error);
      }
    }
  };
  const tryOnce = (): Lock | null => {
    const fd = open();
    try {
      binding.flock(fd, exclusiveNow);
    } catch (error) {
      closeSync(fd);
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN' || code === 'EWOULDBLOCK') return null;
      throw fileError('lock file', path, error);
    }
    return heldLock(fd);
  };
  const heldLock = (fd: number): Lock => ({
    inheritFd: fd,
    commandDiesWithWrapper: false,
    onLost: () => {},
    verify: () => {},
    heartbeat: null,
    // Closing, not LOCK_UN: anything the command left running shares this open file
    // description and must keep the lock, as with util-linux flock.
    release: async () => closeSync(fd),
  });
  return {
    description: `flock ${path}`,
    acquire: ({ waitMs, abort }) => retryUntil(tryOnce, waitMs, abort),
    holder: async () => (await import('./held.js')).localHolder('flock', path, gid),
  };
}

// A --lock-file another user made in a directory every user may write to (/tmp, /var/tmp):
// there a file is its creator's (the kernel's protected_regular refuses even O_CREAT on it
// to others), so two users cannot share such a lock. The refusal says where one can be.
function withSharingHint(open: () => number, path: string): number {
  try {
    return open();
  } catch (error) {
    if (!(error instanceof PermissionError)) throw error;
    let dir: Stats;
    try {
      dir = statSync(dirname(path));
    } catch {
      throw error;
    }
    if ((dir.mode & 0o002) === 0) throw error;
    const owner = statOwner(path);
    throw new PermissionError(
      `${error.message}${owner === null ? '' : `: it belongs to ${describeUser(owner)}`}; in ${dirname(path)}, which every user may write to, a lock file is its creator's alone. Users who share a lock need a directory of their group, setgid so that files made there are the group's: install -d -m 2770 -g GROUP /var/lock/NAME, and --lock-file there`,
    );
  }
}

function statOwner(path: string): number | null {
  try {
    return statSync(path).uid;
  } catch {
    return null;
  }
}

