import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { afterEach, expect } from 'vitest';
import type { RunRow } from '../src/store/types.js';

export const ROOT = resolve(import.meta.dirname, '..');
export const BINARY = join(ROOT, 'dist', 'cronguard.cjs');
export const FIXTURES = join(ROOT, 'test', 'fixtures');
export const fixture = (name: string) => join(FIXTURES, name);

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

// The working directory of binaries a test starts; cronguard itself never reads it.
const SANDBOX_CWD = 'CRONGUARD_TEST_SANDBOX';

// A fresh directory per test with its own lock and state dirs, removed afterwards.
export interface Sandbox {
  readonly dir: string;
  readonly lockDir: string;
  readonly stateDir: string;
  readonly env: NodeJS.ProcessEnv;
  path(name: string): string;
}

export function sandbox(): Sandbox {
  const dir = mkdtempSync(join(tmpdir(), 'cronguard-test-'));
  cleanups.push(() => {
    stopLeftovers(dir);
    rmSync(dir, { recursive: true, force: true });
  });
  const lockDir = join(dir, 'locks');
  const stateDir = join(dir, 'state');
  // Nothing of the developer's own set-up (CRONGUARD_* variables, ~/.config/cronguard) may
  // reach a test; relative paths a test passes land in its sandbox (see start()).
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('CRONGUARD_')));
  const env: NodeJS.ProcessEnv = {
    ...inherited,
    CRONGUARD_LOCK_DIR: lockDir,
    CRONGUARD_STATE_DIR: stateDir,
    XDG_CONFIG_HOME: join(dir, 'config'),
    [SANDBOX_CWD]: dir,
  };
  delete env.NO_COLOR;
  delete env.FORCE_COLOR;
  return { dir, lockDir, stateDir, env, path: (name) => join(dir, name) };
}

// What a test started and left running (a job waiting for a barrier that a failed test
// never released, spinning for good) ends with the test: found by the sandbox its
// environment names, which cronguard passes on to the command.
function stopLeftovers(dir: string): void {
  const mark = Buffer.from(`\0${SANDBOX_CWD}=${dir}\0`);
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      if (Buffer.concat([Buffer.from([0]), readFileSync(`/proc/${pid}/environ`)]).includes(mark)) process.kill(Number(pid), 'SIGKILL');
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
}

export interface Finished {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface Started {
  readonly child: ChildProcess;
  readonly done: Promise<Finished>;
}

// Starts the built binary (no shell in between, so signals reach cronguard itself).
export function start(args: readonly string[], env: NodeJS.ProcessEnv, prefix: readonly string[] = []): Started {
  // `--` as the launcher has it (bin/cronguard): node would take --env-file for its own.
  const argv = [...prefix, process.execPath, '--', BINARY, ...args];
  const child = spawn(argv[0] as string, argv.slice(1), { env, cwd: env[SANDBOX_CWD] ?? ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  const done = new Promise<Finished>((resolveDone) =>
    child.on('close', (code, signal) => resolveDone({ code, signal, stdout, stderr })),
  );
  return { child, done };
}

export function cronguard(args: readonly string[], env: NodeJS.ProcessEnv): Promise<Finished> {
  return start(args, env).done;
}

// Runs any executable (a launcher, install.sh) to its end.
export function runFile(file: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<Finished> {
  const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolveDone) => child.on('close', (code, signal) => resolveDone({ code, signal, stdout, stderr })));
}

// Reads the run log directly, as an outside check would.
export function runs(stateDir: string): RunRow[] {
  const file = join(stateDir, 'cronguard.db');
  if (!existsSync(file)) return [];
  const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT * FROM runs ORDER BY id').all() as RunRow[];
  } finally {
    db.close();
  }
}

// Polls until check() holds. The deadline only turns a hang into a failure: it is far longer
// than anything takes on a loaded machine, and below vitest's testTimeout so the message
// says what never happened (`what`, or what a function of it says then).
export async function waitFor(check: () => boolean | Promise<boolean>, what: string | (() => string), timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Polls until `started` has written to stderr what `pattern` matches (`said` is
// collected(started)). A binary that ends first fails it at once, and one that never says it
// fails it at the deadline; either way the failure quotes what it did say.
export async function waitToSay(started: Started, said: { stderr(): string }, pattern: RegExp, what: string): Promise<void> {
  let ended: Finished | null = null;
  void started.done.then((result) => {
    ended = result;
  });
  await waitFor(
    () => {
      if (pattern.test(said.stderr())) return true;
      if (ended) throw new Error(`${what}: it ended first (${ended.code ?? ended.signal}), having said:\n${ended.stderr}`);
      return false;
    },
    () => `${what}; it has said:\n${said.stderr()}`,
  );
}

// Starts `count` identical invocations at once; exited() says how many have finished so far.
export function startMany(count: number, args: readonly string[], env: NodeJS.ProcessEnv) {
  let exited = 0;
  const all = Array.from({ length: count }, () => start(args, env).done.finally(() => exited++));
  return { exited: () => exited, done: Promise.all(all) };
}

// Creates the BARRIER file hold.sh waits for, letting it finish.
export function release(barrier: string): void {
  writeFileSync(barrier, '');
}

// The start/end marks that hold.sh or record.sh left in a file, checked never to overlap:
// each start is followed by its own end before the next start. Returns how many runs there
// were.
export function serialRuns(file: string, skip = 0): number {
  const marks = lines(file).slice(skip);
  const starts = marks.filter((m) => m.startsWith('start '));
  expect(marks).toEqual(starts.flatMap((s) => [s, `end ${s.split(' ')[1]}`]));
  return starts.length;
}

// A command (argv) that appends to `file` whether process `pid` still runs beside it:
// `beside`, or `alone` when it is gone or a zombie (as isAlive tells, from within the command).
export function besides(pid: number, file: string): string[] {
  return [
    'sh',
    '-c',
    'state=$(sed "s/.*) \\(.\\).*/\\1/" /proc/$0/stat 2>/dev/null); case "$state" in ""|Z|X) echo alone;; *) echo beside;; esac >> "$1"',
    String(pid),
    file,
  ];
}

// Alive and not a zombie: orphans linger as zombies when this machine's init is slow to reap.
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
}

// The non-empty lines of a file a fixture writes to, or none while it does not exist.
export function lines(file: string): string[] {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

// Root ignores file permissions, so permission tests run the binary as nobody.
export const asNobody: readonly string[] =
  process.geteuid?.() === 0 ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'] : [];

// The run records spooled in a state dir (one directory per database and schema).
export function spooled(stateDir: string): string[] {
  const root = join(stateDir, 'spool');
  if (!existsSync(root)) return [];
  return readdirSync(root).flatMap((target) => readdirSync(join(root, target)).filter((f) => f.endsWith('.json')));
}

// Runs the built binary in a pseudo-terminal (util-linux script(1)), as from a person's
// terminal: stdout and stderr are a TTY, and both come back, in order, as `stdout` (with the
// terminal's \r\n turned back into \n).
// What a person's terminal does not have: colour libraries turn colour off when CI is set.
export const CI_VARS = ['CI', 'CONTINUOUS_INTEGRATION', 'BUILD_NUMBER', 'RUN_ID'];

export function asPerson(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !CI_VARS.includes(k)));
}

export function inTerminal(args: readonly string[], env: NodeJS.ProcessEnv): Promise<Finished> {
  const quote = (arg: string) => `'${arg.replaceAll("'", "'\\''")}'`;
  const command = [process.execPath, BINARY, ...args].map(quote).join(' ');
  const child = spawn('script', ['-qec', command, '/dev/null'], { env: { ...asPerson(env), SHELL: '/bin/sh' }, cwd: env[SANDBOX_CWD] ?? ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolveDone) =>
    child.on('close', (code, signal) => resolveDone({ code, signal, stdout: stdout.replaceAll('\r\n', '\n'), stderr })),
  );
}

// What a started binary has written to stdout and stderr so far.
export function collected(started: Started): { stdout(): string; stderr(): string } {
  let stdout = '';
  let stderr = '';
  started.child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
  started.child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  return { stdout: () => stdout, stderr: () => stderr };
}

// A directory on a file system of its own, `size` big (tmpfs, so root only: tests that need
// it return early otherwise); `full` fills it up. Unmounted after the test.
export function smallDisk(size: string, full = false): string {
  const dir = mkdtempSync(join(tmpdir(), 'cronguard-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=1777`, 'tmpfs', dir]);
  cleanups.push(() => {
    execFileSync('umount', [dir]);
    rmSync(dir, { recursive: true });
  });
  if (full) execFileSync('sh', ['-c', `cat /dev/zero > ${dir}/filler 2>/dev/null; true`]);
  return dir;
}

