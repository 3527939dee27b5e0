import { readdirSync, readFileSync, statSync } from 'node:fs';
import { describeUser, euid } from '../util/sharing.js';

// A process as the kernel sees it: its real and effective users and every group it is in.
interface Proc {
  readonly pid: number;
  readonly uids: readonly number[];
  readonly gids: readonly number[];
}

// Who holds a local lock, when it is a stranger: a process of a user who is neither this
// user, nor root, nor in the group `gid` the lock is shared with. Such a holder makes every
// run skip, and is reported rather than taken for another run of the job. `pid` is the one
// that took the lock; when it is gone (a shell ran `flock 9` and kept the descriptor), the
// processes that still have a flock lock file open stand for it, and only if none of them
// shares the job. A lockfile lease names its pid in a file anyone who may write there can
// forge: it counts only when that process runs as the user who made the lease (`owner`).
// Null when a sharer may hold it, or nobody can tell (/proc hides the process).
export function strangerHolding(path: string, pid: number | null, gid: number | null, owner?: number): string | null {
  const alive = pid === null ? null : proc(pid);
  const holders = owner !== undefined ? (alive?.uids.includes(owner) ? [alive] : []) : alive ? [alive] : openers(path);
  if (holders.length === 0 || holders.some((p) => shares(p, gid))) return null;
  const first = holders[0] as Proc;
  return `${describeUser(first.uids[0] as number)}, pid ${first.pid}`;
}

// A process shares the job when it is in the lock's group, or when both its users (real
// and effective) do: a stranger's setuid program (su at its prompt) runs as root, yet it is
// the stranger who holds the lock through it.
function shares(p: Proc, gid: number | null): boolean {
  return (gid !== null && p.gids.includes(gid)) || p.uids.every((uid) => uid === euid() || uid === 0);
}

function proc(pid: number): Proc | null {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  // "Uid:" and "Gid:" list real, effective, saved and file-system ids: the effective one counts.
  const ids = (field: string) => (new RegExp(`^${field}:\\s*(.*)$`, 'm').exec(status)?.[1] ?? '').split(/\s+/).filter(Boolean).map(Number);
  const [real, effective] = ids('Uid');
  const gid = ids('Gid')[1];
  if (real === undefined || effective === undefined || gid === undefined) return null;
  return { pid, uids: [real, effective], gids: [gid, ...ids('Groups')] };
}

// The processes (other than this one) with the file open, as far as /proc lets us see:
// root sees all, a user its own.
function openers(path: string): Proc[] {
  let target: { dev: number; ino: number };
  try {
    target = statSync(path);
  } catch {
    return [];
  }
  const found: Proc[] = [];
  for (const entry of safeReaddir('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    for (const fd of safeReaddir(`/proc/${pid}/fd`)) {
      if (!isFile(`/proc/${pid}/fd/${fd}`, target)) continue;
      const p = proc(pid);
      if (p) found.push(p);
      break;
    }
  }
  return found;
}

function isFile(link: string, target: { dev: number; ino: number }): boolean {
  try {
    const stat = statSync(link);
    return stat.ino === target.ino && stat.dev === target.dev;
  } catch {
    return false;
  }
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
