import { lstatSync, readlinkSync, type Stats } from 'node:fs';
import { CantCreateError, PermissionError, fileError } from '../errors.js';
import { mkdirp } from '../util/mkdirp.js';

// Makes sure a lock directory exists and is safe to create lock files in. A symlink is
// refused because a lock dir swapped for a link would let another user steer where we create
// files; a private default directory must also belong to us.
export function ensureLockDir(dir: string, privateDir: boolean): void {
  let stat = lstatOrNull(dir);
  if (!stat) {
    try {
      mkdirp(dir, privateDir ? 0o700 : 0o755);
    } catch (error) {
      throw fileError('lock directory', dir, error);
    }
    stat = lstatOrNull(dir) as Stats;
  }
  if (stat.isSymbolicLink()) {
    throw new CantCreateError(
      `lock directory ${dir} is a symbolic link (to ${readlinkSync(dir)}); give the real directory with --lock-dir`,
    );
  }
  if (!stat.isDirectory()) throw new CantCreateError(`lock directory ${dir} is not a directory`);
  if (privateDir && stat.uid !== process.geteuid?.()) {
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
