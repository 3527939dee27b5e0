import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Finished, type Started, start, waitFor } from '../helpers.js';

// A host of its own for tests of who shares a lock: a mount namespace in which /run/lock and
// /var/lib are empty (root's default lock and state directories start afresh), and /etc is
// an overlay whose changes (the test's users, the cronguard group, what install.sh writes)
// stay in the test's directory. The users are real to the kernel (their own uids, checked by every open
// and flock), exist only while the test does, and leave the machine's own files untouched.
// Root only (namespaces and setpriv); each invocation runs in the namespace through nsenter.

export const GROUP_ID = 61000;

export interface User {
  readonly name: string;
  readonly uid: number;
  readonly home: string;
  // In the cronguard group.
  readonly member: boolean;
  // Other groups its processes are in (as a login would give them).
  readonly groups?: readonly number[];
}

// Waits until `pid` has left this process's mount namespace and become `sleep`: only then
// may mounts be made through it (before, they would land on the machine itself).
function inNewNamespace(pid: number): void {
  const own = readlinkSync('/proc/self/ns/mnt');
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let tries = 0; ; tries++) {
    try {
      if (readlinkSync(`/proc/${pid}/ns/mnt`) !== own && readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep') return;
    } catch {
      // Not there yet.
    }
    if (tries > 6000) throw new Error('unshare did not start a mount namespace');
    Atomics.wait(pause, 0, 0, 10);
  }
}

export class TestHost {
  readonly dir: string;
  private readonly holder: ChildProcess;
  private readonly users = new Map<string, User>();
  private readonly groups: number[] = [];

  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), 'cronguard-host-'));
    chmodSync(this.dir, 0o755);
    mkdirSync(join(this.dir, 'etc'));
    mkdirSync(join(this.dir, 'etc-work'));
    // unshare execs sleep in the new namespace: its pid is the namespace's handle.
    this.holder = spawn('unshare', ['--mount', '--propagation', 'private', 'sleep', 'infinity'], { stdio: 'ignore' });
    inNewNamespace(this.holder.pid as number);
    this.enter('sh', '-c', [
      'set -e',
      'mount -t tmpfs -o mode=1777 tmpfs /run/lock',
      'mount -t tmpfs -o mode=755 tmpfs /var/lib',
      `mount -t overlay overlay -o lowerdir=/etc,upperdir=${this.dir}/etc,workdir=${this.dir}/etc-work /etc`,
      // A host starts without the group, whether or not install.sh made it on this machine
      // (README's set-up runs it before npm test): the tests add it where they want it.
      "sed -i '/^cronguard:/d' /etc/group",
      "[ ! -e /etc/gshadow ] || sed -i '/^cronguard:/d' /etc/gshadow",
    ].join('\n'));
  }

  // Adds a user (and a group of its own) to the host's /etc/passwd and /etc/group.
  addUser(name: string, uid: number, member: boolean, groups: readonly number[] = []): User {
    const home = join(this.dir, name);
    mkdirSync(home, { mode: 0o700 });
    chownSync(home, uid, uid);
    this.sh(`echo '${name}:x:${uid}:${uid}::${home}:/bin/sh' >> /etc/passwd`);
    this.addGroupLine(`${name}:x:${uid}:`);
    const user = { name, uid, home, member, groups };
    this.users.set(name, user);
    return user;
  }

  // The cronguard group, as install.sh makes it.
  addCronguardGroup(): void {
    const members = [...this.users.values()].filter((u) => u.member).map((u) => u.name);
    this.addGroupLine(`cronguard:x:${GROUP_ID}:${members.join(',')}`);
  }

  // A shell command in the host as root, to its end; its stdout.
  sh(script: string): string {
    return this.enter('sh', '-c', script);
  }

  // A shell command in the host as `user`, to its end; its stdout and stderr, and its exit
  // status as a last line `exit N`.
  shAs(user: User, script: string): string {
    const quoted = `'${script.replaceAll("'", "'\\''")}'`;
    return this.sh(`${this.prefix(user).slice(5).join(' ')} sh -c ${quoted} 2>&1; echo "exit $?"`);
  }

  // Starts cronguard in the host as `user` (root when null), with its default directories.
  start(user: User | null, args: readonly string[], env: NodeJS.ProcessEnv = {}): Started {
    return start(args, this.env(user, env), this.prefix(user));
  }

  run(user: User | null, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Finished> {
    return this.start(user, args, env).done;
  }

  // Starts any program in the host as `user`, in a process group of its own that close()
  // (or stop) ends whole.
  spawn(user: User | null, argv: readonly string[]): ChildProcess {
    const full = [...this.prefix(user), ...argv];
    const child = spawn(full[0] as string, full.slice(1), { env: this.env(user, {}), cwd: this.dir, stdio: 'ignore', detached: true });
    this.groups.push(child.pid as number);
    return child;
  }

  // Kills a spawned program and everything it started.
  stop(child: ChildProcess): void {
    try {
      process.kill(-(child.pid as number), 'SIGKILL');
    } catch {
      // Already gone.
    }
  }

  close(): void {
    for (const pid of this.groups) this.stop({ pid } as ChildProcess);
    this.holder.kill('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }

  private prefix(user: User | null): string[] {
    const enter = ['nsenter', '-t', String(this.holder.pid), '-m', '--'];
    if (!user) return enter;
    const gids = [...(user.member ? [this.cronguardGid()] : []), ...(user.groups ?? [])];
    const groups = gids.length > 0 ? [`--groups=${gids.join(',')}`] : ['--clear-groups'];
    return [...enter, 'setpriv', `--reuid=${user.uid}`, `--regid=${user.uid}`, ...groups, '--'];
  }

  // The environment a user's crontab line or login shell has: nothing of cronguard's.
  private env(user: User | null, extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH,
      HOME: user ? user.home : this.dir,
      LOGNAME: user ? user.name : 'root',
      XDG_CONFIG_HOME: join(this.dir, 'no-config'),
      CRONGUARD_TEST_SANDBOX: this.dir,
      ...extra,
    };
  }

  // The cronguard group's gid as the host's /etc/group has it (install.sh's groupadd picks one).
  private cronguardGid(): number {
    const found = /^cronguard:[^:]*:(\d+):/m.exec(this.sh('cat /etc/group'));
    return found ? Number(found[1]) : GROUP_ID;
  }

  // A group of its own (name:x:gid:members) in the host's /etc/group.
  addGroupLine(line: string): void {
    this.sh(`echo '${line}' >> /etc/group`);
  }

  private enter(...argv: string[]): string {
    return execFileSync('nsenter', ['-t', String(this.holder.pid), '-m', '--', ...argv], { encoding: 'utf8' });
  }
}

// The usual cast: alice and bob in the cronguard group (when `group`), mallory not; and a
// directory every one of them may write marks to.
export interface Cast {
  readonly host: TestHost;
  readonly alice: User;
  readonly bob: User;
  readonly mallory: User;
  marks(name: string): string;
  // mode, owner and group of a path in the host
  statOf(path: string): string;
  // A process of `user` (through `wrap`, a setpriv of root's, when `user` is null) holding
  // a lock file read-only, as `flock -s FILE sleep` would; or (`fd`) a shell that keeps the
  // descriptor while the flock(1) that locked it exits, so /proc/locks names a pid gone.
  hold(user: User | null, path: string, how?: 'flock' | 'fd', wrap?: readonly string[]): Promise<ChildProcess>;
}

export function newCast(group: boolean): Cast {
  const host = new TestHost();
  const alice = host.addUser('cg-alice', 61001, true);
  const bob = host.addUser('cg-bob', 61002, true);
  const mallory = host.addUser('cg-mallory', 61003, false);
  if (group) host.addCronguardGroup();
  const marks = join(host.dir, 'marks');
  mkdirSync(marks, { mode: 0o777 });
  chmodSync(marks, 0o777);
  return {
    host, alice, bob, mallory,
    marks: (name) => join(marks, name),
    statOf: (path) => host.sh(`stat -c '%a %U %G' ${path}`).trim(),
    hold: async (user, path, how = 'flock', wrap = []) => {
      const ready = join(marks, `held-${Date.now()}-${Math.random()}`);
      const script = how === 'flock'
        ? `exec flock -n -s ${path} sh -c 'touch ${ready}; exec sleep 1000'`
        : `exec 9<${path} && flock -n -s 9 && touch ${ready} && exec sleep 1000`;
      const child = host.spawn(user, [...wrap, 'sh', '-c', script]);
      await waitFor(() => existsSync(ready) || child.exitCode !== null, 'the holder to take the lock');
      if (!existsSync(ready)) throw new Error(`the holder could not take ${path}`);
      return child;
    },
  };
}
