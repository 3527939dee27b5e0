import { closeSync, constants } from 'node:fs';
import { basename, dirname } from 'node:path';
import { fileError } from '../errors.js';
import { loadAddon } from '../util/addon.js';
import { openInDirectory, openRegular } from '../util/safe-path.js';
import { type Lock, type LockBackend, retryUntil } from './backend.js';

// fs-ext's addon itself (its fs-ext.js only maps 'exnb' to these flags).
type FsExtBinding = { flock(fd: number, operation: number): void; constants: { LOCK_EX: number; LOCK_NB: number } };

// O_RDONLY is enough for flock(2), so users who share a lock file only need read access;
// no O_TRUNC, ever. (No symlink, FIFO or other non-regular file is opened: safe-path.)
const OPEN_FLAGS = constants.O_RDONLY | constants.O_CREAT;

// flock(2) on a file, exactly like util-linux `flock -n PATH`: the descriptor is handed to
// the command, so the lock is held for as long as the command or anything it started lives.
// `inLockDir`: the file lives in a lock directory cronguard checked, and is opened relative
// to it; otherwise (--lock-file) by its path.
export function flockBackend(path: string, inLockDir: boolean): LockBackend {
  const binding = loadAddon<FsExtBinding>('fs-ext', 'build/Release/fs_ext.node');
  const exclusiveNow = binding.constants.LOCK_EX | binding.constants.LOCK_NB;
  const open = inLockDir
    ? () => openInDirectory(dirname(path), basename(path), OPEN_FLAGS, 'lock file')
    : () => openRegular(path, OPEN_FLAGS, 'lock file');
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
  return { description: `flock ${path}`, acquire: ({ waitMs, abort }) => retryUntil(tryOnce, waitMs, abort) };
}
