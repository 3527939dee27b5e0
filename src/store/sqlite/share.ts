import { closeSync, constants, fchmodSync, fchownSync, fstatSync, lstatSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileError, PermissionError, UsageError } from '../../errors.js';
import { mkdirp } from '../../util/io.js';
import { checkPrivateDirectory } from '../../util/safe-path.js';
import { euid, groupId, SHARED_DIR_MODE } from '../../util/sharing.js';

// `cronguard migrate --group G` for the embedded run log: the users of group G (a web
// application's www-data) may write to it, requests included, and nobody else. SQLite
// writes beside the database: whoever opens it first after the last one closed creates its
// -wal and -shm, so the group needs the directory as well as the files. The directory is
// made root's, shared as root's own shared directories are (setgid and sticky, 3770: what
// a member makes there belongs to the group, and nobody can rename or remove what another
// made); root's runs then take the files over before SQLite opens them and refuse a link in
// their place (files.ts). That protection is root's to give, so root does this: a
// member must never be able to plant a file that a job's owner would then follow.
// Returns the group's id; the files follow when the store opens (prepareSqliteFiles).
export function shareStateDir(dir: string, group: string): number {
  if (euid() !== 0) throw new PermissionError(`--group: only root shares the embedded run log with a group (its directory must be root's); run cronguard migrate --group ${group} as root`);
  const gid = groupId(group);
  if (gid === null) throw new UsageError(`--group: no group '${group}' in /etc/group`);
  if (gid === 0) throw new UsageError('--group: give the group of the users who may write requests, not root\'s');
  if (!exists(dir)) makeDirectory(dir);
  // Root's, private or shared already, and nothing above it another user could swap.
  checkPrivateDirectory(dir, 'state directory');
  let fd: number;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (error) {
    throw fileError('state directory', dir, error);
  }
  try {
    if (fstatSync(fd).uid !== 0) throw new PermissionError(`state directory ${dir} is not root's; refusing to share it`);
    fchownSync(fd, 0, gid);
    fchmodSync(fd, SHARED_DIR_MODE);
  } catch (error) {
    throw error instanceof PermissionError ? error : fileError('state directory', dir, error);
  } finally {
    closeSync(fd);
  }
  return gid;
}

function makeDirectory(dir: string): void {
  try {
    mkdirp(dirname(dir), 0o755);
    mkdirp(dir, 0o700);
  } catch (error) {
    throw fileError('state directory', dir, error);
  }
}

function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}
