import { closeSync, constants, fchmodSync, fchownSync, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, type Stats } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { fileError, PermissionError } from '../errors.js';
import { mkdirp } from './io.js';

// Who shares a local lock and the embedded run log: the user who owns it, root, and the
// members of the `cronguard` group. Root's directories are shared with that group when it
// exists: setgid, so that what anyone makes in them belongs to the group, and sticky, so
// that a member can rename or remove only what it owns and nobody can swap root's lock file
// or run log for one of their own (the contract's 2770, plus the sticky bit for that).
export const SHARED_GROUP = 'cronguard';
export const SHARED_LOCK_DIR = '/run/lock/cronguard';
export const SHARED_STATE_DIR = '/var/lib/cronguard';
export const SHARED_DIR_MODE = 0o3770;
const SETGID = 0o2000;
const STICKY = 0o1000;

export function euid(): number {
  return process.geteuid?.() ?? 0;
}

// The group a directory shares its files with: its own, when it is setgid and others have
// no access to it; null for a private directory.
export function sharingGid(stat: Stats): number | null {
  return (stat.mode & SETGID) !== 0 && (stat.mode & 0o007) === 0 && stat.gid !== 0 ? stat.gid : null;
}

// What a file made in a directory shared with `gid` (or in a private one) is given.
export function fileMode(gid: number | null): number {
  return gid === null ? 0o600 : 0o660;
}

// Whether this process may use what a group shares.
export function inGroup(gid: number): boolean {
  return process.getegid?.() === gid || (process.getgroups?.() ?? []).includes(gid);
}

// Whether this user works in root's shared directory `dir`: a member of the cronguard group
// (by /etc/group, or by the group of the directory as it is) always does, whatever state
// the directory is in, so that a member is told what is wrong with it rather than quietly
// running beside root's job with locks of its own.
export function joinsShared(dir: string): boolean {
  const gid = groupId(SHARED_GROUP);
  if (gid !== null && inGroup(gid)) return true;
  if (sessionLacksGroup()) return true;
  try {
    const stat = lstatSync(dir);
    const shared = sharingGid(stat);
    return stat.isDirectory() && stat.uid === 0 && shared !== null && inGroup(shared);
  } catch {
    return false;
  }
}

// Listed in the cronguard group by /etc/group, in a session started before that (groups are
// read at login): such a member must not quietly take a lock of its own.
function sessionLacksGroup(): boolean {
  const gid = groupId(SHARED_GROUP);
  if (gid === null || inGroup(gid)) return false;
  const me = userInfo().username;
  const members = lookup('/etc/group', (fields) => fields[0] === SHARED_GROUP)?.[3]?.split(',') ?? [];
  return members.includes(me) || lookup('/etc/passwd', (fields) => fields[0] === me)?.[3] === String(gid);
}

// Whether `stat` is root's directory shared with a group this user is in.
export function sharedWithMe(stat: Stats): boolean {
  const gid = sharingGid(stat);
  return stat.isDirectory() && stat.uid === 0 && gid !== null && inGroup(gid);
}

// What a member is told when root's shared directory is not (yet) what it must be.
export function notShared(dir: string, what: string, exists: boolean): string {
  if (sessionLacksGroup()) {
    return `${what} ${dir}: you are in group ${SHARED_GROUP} by /etc/group, but this login session is not yet; log in again, or run it through sg ${SHARED_GROUP} -c '...'`;
  }
  const other = exists ? sharedGroupName(dir) : null;
  if (other !== null) return `${what} ${dir} is shared with group ${other}, which this user is not in`;
  const state = exists ? 'is not shared with group ' : 'does not exist yet; it is shared with group ';
  return `${what} ${dir} ${state}${SHARED_GROUP}: root makes it so (install.sh, systemd-tmpfiles at boot, or any cronguard run as root), or give a directory of your own`;
}

// The group root's directory was shared with by hand (migrate --group), when not cronguard.
function sharedGroupName(dir: string): string | null {
  try {
    const stat = lstatSync(dir);
    const gid = sharingGid(stat);
    if (gid === null || stat.uid !== 0 || gid === groupId(SHARED_GROUP)) return null;
    return lookup('/etc/group', (fields) => fields[2] === String(gid))?.[0] ?? `gid ${gid}`;
  } catch {
    return null;
  }
}

export function isSharedPath(dir: string): boolean {
  return dir === SHARED_LOCK_DIR || dir === SHARED_STATE_DIR;
}

// Makes root's shared directory when it is missing, and brings one that exists to the
// shared form once the group exists (an install from before the group; a hand-made 2770
// without the sticky bit). Without the group it is root's alone (0700). The changes go
// through a descriptor of the directory itself, never through a path someone could swap.
export function makeRootDir(dir: string, what: string): void {
  // Someone may make it again between the move and root's mkdir: a few rounds settle that.
  // On every run but the first it is there already, root's: one lstat.
  for (let round = 1; round <= 5 && !moveAsideUnlessRoots(dir); round++) {
    try {
      mkdirp(dirname(dir), 0o755);
      mkdirSync(dir, 0o700);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw fileError(what, dir, error);
    }
  }
  let fd: number;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch {
    return; // A link or a non-directory: the checks that follow say what is wrong.
  }
  try {
    const stat = fstatSync(fd);
    if (stat.uid !== 0) return;
    if (sharingGid(stat) !== null && (stat.mode & 0o7777) === SHARED_DIR_MODE) return;
    const gid = groupId(SHARED_GROUP);
    if (stat.gid !== 0 && stat.gid !== gid) return; // Another group, chosen by hand.
    if (gid === null) {
      if ((stat.mode & 0o077) !== 0) fchmodSync(fd, 0o700);
      return;
    }
    if (stat.gid !== gid) fchownSync(fd, 0, gid);
    fchmodSync(fd, SHARED_DIR_MODE);
  } catch (error) {
    throw fileError(what, dir, error);
  } finally {
    closeSync(fd);
  }
}

// Anybody may create in /run/lock, and a member in root's shared state directory: whatever
// someone else made where root keeps a directory of its own (a directory, a link, a file)
// would stop root's jobs or steer them. Root moves it aside under a name nobody can guess
// (so nobody can take that name first), for the operator to look at, and makes its own.
// Returns whether root's own directory is there.
export function moveAsideUnlessRoots(path: string): boolean {
  if (euid() !== 0) return false;
  let stat: Stats;
  try {
    stat = lstatSync(path);
  } catch {
    return false;
  }
  if (stat.isDirectory() && stat.uid === 0) return true;
  renameSync(path, `${path}.not-root-${stat.uid}-${Date.now()}-${Math.random().toString(36).slice(2, 12)}`);
  return false;
}

// Gives a file cronguard opened the mode its directory calls for (fileMode), and in a shared
// directory its group. Only a file this user owns is changed: an old 0644 lock file is
// tightened on first use. `takeOver` (root, in its shared directory): a file a member made
// becomes root's, so that no member can swap it any more (the directory is sticky); one
// with another name elsewhere (a hard link) is refused rather than taken. Returns its stat.
export function settleFile(fd: number, gid: number | null, shown: string, what: string, takeOver = false): Stats {
  const stat = fstatSync(fd);
  const mine = stat.uid === euid();
  if (stat.nlink !== 1) {
    if (takeOver && !mine) throw new PermissionError(`${what} ${shown} has another name elsewhere (${stat.nlink} links); remove it`);
    return stat;
  }
  if (!mine && !takeOver) return stat;
  const mode = fileMode(gid);
  if (!mine || (gid !== null && stat.gid !== gid)) fchownSync(fd, euid(), gid ?? stat.gid);
  if ((stat.mode & 0o7777) !== mode) fchmodSync(fd, mode);
  return fstatSync(fd);
}

// Whether `path` still names the file open as `fd`: nobody renamed it away meanwhile.
export function stillNamed(fd: number, path: string): boolean {
  try {
    const open = fstatSync(fd);
    const named = lstatSync(path);
    return open.ino === named.ino && open.dev === named.dev;
  } catch {
    return false;
  }
}

// A subdirectory of this user's own in a state directory: `base` in one the user owns (or
// that is not there yet); `base-<uid>` for a member in root's shared one, so that root never
// works in a directory a member controls, nor a member in another's.
export function ownSubdir(stateDir: string, base: string): string {
  try {
    if (lstatSync(stateDir).uid !== euid()) return join(stateDir, `${base}-${euid()}`);
  } catch {
    // Not there yet: it will be this user's.
  }
  return join(stateDir, base);
}

// Whether a shared directory also keeps its entries from being renamed by other members.
export function isSticky(stat: Stats): boolean {
  return (stat.mode & STICKY) !== 0;
}

// The gid of a group in /etc/group (where groupadd puts it); null when there is none. Read
// once per process: a run asks for its lock and its state directory.
const groups = new Map<string, number | null>();
export function groupId(name: string): number | null {
  if (!groups.has(name)) {
    const entry = lookup('/etc/group', (fields) => fields[0] === name);
    groups.set(name, entry ? Number(entry[2]) : null);
  }
  return groups.get(name) as number | null;
}

// A user's name from /etc/passwd, for messages; null when it has none there.
export function nameOf(uid: number): string | null {
  return lookup('/etc/passwd', (fields) => fields[2] === String(uid))?.[0] ?? null;
}

// A user for a message: `name (uid N)`, or `uid N` without a name.
export function describeUser(uid: number): string {
  const name = nameOf(uid);
  return name === null ? `uid ${uid}` : `user ${name} (uid ${uid})`;
}

function lookup(file: string, match: (fields: string[]) => boolean): string[] | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const fields = line.split(':');
    if (fields.length >= 3 && /^\d+$/.test(fields[2] as string) && match(fields)) return fields;
  }
  return null;
}
