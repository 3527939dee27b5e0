import { closeSync, constants, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileError } from '../errors.js';
import { type Lock, type LockBackend, retryUntil } from './backend.js';

type FsExt = { flockSync(fd: number, flags: 'exnb'): void };

// O_RDONLY is enough for flock(2), so users who share a lock file only need read access;
// O_NOFOLLOW refuses a symlink planted in place of the lock file; no O_TRUNC, ever.
const OPEN_FLAGS = constants.O_RDONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NOCTTY;

// flock(2) on a file, exactly like util-linux `flock -n PATH`: the descriptor is handed to
// the command, so the lock is held for as long as the command or anything it started lives.
export function flockBackend(path: string): LockBackend {
  const { flockSync } = createRequire(import.meta.url)('fs-ext') as FsExt;
  const tryOnce = (): Lock | null => {
    let fd: number;
    try {
      fd = openSync(path, OPEN_FLAGS, 0o644);
    } catch (error) {
      throw fileError('lock file', path, error);
    }
    try {
      flockSync(fd, 'exnb');
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
    // Closing, not LOCK_UN: anything the command left running shares this open file
    // description and must keep the lock, as with util-linux flock.
    release: async () => closeSync(fd),
  });
  return { description: `flock ${path}`, acquire: ({ waitMs }) => retryUntil(tryOnce, waitMs) };
}
