import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describeUser, euid, nameOf } from '../util/sharing.js';

// A local lock is its owner's (and root's, shared with the group cronguard): root and two other
// users each running `cronguard -n task` run at once, as docs/locks.md's "Who shares a lock" says,
// and a person who wants "never twice on this host, whoever starts it" finds out after the
// fact. At a terminal only (never under cron, never costing a plain run anything), a job that
// another user also runs under a lock of its own is named in one line, with the fix.

const FIX = 'to share one lock, join the group cronguard (usermod -aG cronguard USER) or give every run --db';

// Root (or a member sharing root's lock directory): the private lock files of this job that
// other users keep, in their own default lock directories. Another user: the cronguard
// processes of other users running this job now (their lock files cannot be seen).
export function privateLockNote(job: string, shared: boolean): string | null {
  if (shared) {
    const owners = privateLockFiles(job);
    if (owners.length === 0) return null;
    const who = owners.map((o) => `${describeUser(o.uid)} (${o.path})`).join(', ');
    return `note: ${job} also has a lock of its own for ${who}: their runs and these do not exclude each other; ${FIX.replace('USER', owners.map((o) => userName(o.uid)).join(' and '))}`;
  }
  const others = otherUsersRunning(job);
  if (others.length === 0) return null;
  const who = others.map((o) => `${describeUser(o.uid)} (pid ${o.pid})`).join(', ');
  return `note: ${job} runs now for ${who} under a lock of its own, which this run does not share: the two do not exclude each other; ${FIX.replace('USER', userName(euid()))}`;
}

interface Owned {
  readonly uid: number;
  readonly path: string;
}

// The users' default private lock directories (see paths.ts): $XDG_RUNTIME_DIR's, which is
// /run/user/UID on a systemd host, and ~/.cache/cronguard/locks.
function privateLockFiles(job: string): Owned[] {
  const found: Owned[] = [];
  for (const { uid, home } of users()) {
    if (uid === euid()) continue;
    for (const dir of [`/run/user/${uid}/cronguard`, join(home, '.cache', 'cronguard', 'locks')]) {
      const path = join(dir, `${job}.lock`);
      const stat = statOrNull(path);
      if (stat?.isFile() && stat.uid === uid) found.push({ uid, path });
    }
  }
  return found;
}

// Other users' processes whose command line runs cronguard with this job name.
function otherUsersRunning(job: string): { uid: number; pid: number }[] {
  const running: { uid: number; pid: number }[] = [];
  for (const entry of readdirOrEmpty('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const uid = statOrNull(`/proc/${entry}`)?.uid;
    if (uid === undefined || uid === euid()) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (runsJob(argv, job)) running.push({ uid, pid: Number(entry) });
  }
  return running;
}

// Whether a process's command line (`node [OPTIONS] [--] …/cronguard.cjs OPTIONS -- COMMAND`,
// as the launcher execs it) is cronguard's, running `job`. The script is known by its file
// name: a node installed under a directory named for cronguard is not it.
export function runsJob(cmdline: readonly string[], job: string): boolean {
  const script = cmdline.findIndex((a) => /(^|\/)cronguard(\.cjs)?$/.test(a));
  if (script < 0) return false;
  const argv = cmdline.slice(script + 1);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--') return false;
    if ((arg === '-n' || arg === '--name') && argv[i + 1] === job) return true;
    if (arg === `--name=${job}` || arg === `-n${job}`) return true;
  }
  return false;
}

function users(): { uid: number; home: string }[] {
  let passwd: string;
  try {
    passwd = readFileSync('/etc/passwd', 'utf8');
  } catch {
    return [];
  }
  return passwd.split('\n').flatMap((line) => {
    const f = line.split(':');
    const uid = Number(f[2]);
    return f.length >= 6 && Number.isInteger(uid) && uid > 0 ? [{ uid, home: f[5] as string }] : [];
  });
}

function userName(uid: number): string {
  return nameOf(uid) ?? String(uid);
}

function statOrNull(path: string) {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

function readdirOrEmpty(path: string): string[] {
  try {
    return readdirSync(path);
  } catch {
    return [];
  }
}
