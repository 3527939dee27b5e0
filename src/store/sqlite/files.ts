import { closeSync, constants, fchmodSync, fstatSync, lstatSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { PermissionError } from '../../errors.js';
import { EMBEDDED_LOG_FILE } from '../../util/paths.js';
import { openInDirectory } from '../../util/safe-path.js';
import { euid, fileMode, settleFile } from '../../util/sharing.js';

// The embedded run log's files, made ready before SQLite opens them by name. SQLite creates
// -wal and -shm with the database file's mode, so creating the file 0600 (0660 for the group
// of a shared directory) first keeps all three so; and a link or FIFO in its place is
// refused. Root, in a directory its group shares (`gid`), makes them all its own first: a
// member could otherwise have left a link where SQLite, as root, would follow it.
export function prepareSqliteFiles(stateDir: string, gid: number | null): void {
  const takeOver = gid !== null && euid() === 0;
  for (const name of takeOver ? [EMBEDDED_LOG_FILE, `${EMBEDDED_LOG_FILE}-wal`, `${EMBEDDED_LOG_FILE}-shm`] : [EMBEDDED_LOG_FILE]) {
    const fd = openInDirectory(stateDir, name, constants.O_RDONLY | constants.O_CREAT, 'run log', fileMode(gid));
    try {
      settleFile(fd, gid, join(stateDir, name), 'run log', takeOver);
    } finally {
      closeSync(fd);
    }
  }
  if (takeOver) rootOwnJournal(stateDir);
}

// A rollback journal found beside a database is played back when SQLite opens it, and may
// name a super-journal that SQLite then deletes: a member who left one could have root
// delete any file. The log runs in WAL mode and never writes one; so in root's shared
// directory the only journal allowed is root's own, readable by root alone. One of anyone
// else's (or a link) goes, and root leaves an empty one of its own in its place (empty is
// never played back; members open the log without reading it).
function rootOwnJournal(stateDir: string): void {
  const name = `${EMBEDDED_LOG_FILE}-journal`;
  const path = join(stateDir, name);
  const found = lstatOrNull(path);
  if (found && !(found.isFile() && found.uid === 0 && found.nlink === 1)) unlinkSync(path);
  const fd = openInDirectory(stateDir, name, constants.O_RDONLY | constants.O_CREAT, 'run log', 0o600);
  try {
    const stat = fstatSync(fd);
    if (stat.uid !== 0 || stat.nlink !== 1) throw new PermissionError(`run log journal ${path} was put back by another user; see who is in its group`);
    if ((stat.mode & 0o777) !== 0o600) fchmodSync(fd, 0o600);
  } finally {
    closeSync(fd);
  }
}

function lstatOrNull(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}
