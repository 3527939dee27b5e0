import { accessSync, constants, statSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import { isatty } from 'node:tty';
import type { RunConfig } from '../cli/config.js';
import { CommandNotFoundError, NotExecutableError } from '../errors.js';
import type { NewRun } from '../store/types.js';
import type { Messages } from '../util/io.js';
import { judge } from './outcome.js';
import { supervise } from './supervisor.js';
import { wire } from './wiring.js';

// One invocation of `cronguard run`: lock, record, supervise, record, release. Returns the
// exit code; throws only typed errors for problems found before anything ran.
export async function runJob(config: RunConfig, say: Messages): Promise<number> {
  const file = resolveCommand(config.argv[0] as string, process.env.PATH);
  const run: NewRun = {
    job: config.name,
    trigger: isatty(0) ? 'manual' : 'cron',
    attempt: 1,
    host: hostname(),
    pid: process.pid,
    username: currentUser(),
    command: config.display,
    startedAt: new Date(),
  };
  const { backend, recorder, roundTrips, close } = await wire(config, run, say);
  let lock: Awaited<ReturnType<typeof backend.acquire>> = null;
  try {
    lock = await backend.acquire({ waitMs: config.waitMs });
    if (!lock) {
      say.verbose(`${config.name}: lock held by another instance (${backend.description}); skipping with exit ${config.conflictExitCode}`);
      await recorder.overlap(config.name, config.lock === 'postgres' ? null : run.host);
      return config.conflictExitCode;
    }
    say.verbose(`${config.name}: holding ${backend.description}`);
    await recorder.deliverSpool(isAlive);
    await recorder.start(run, isAlive);
    const child = supervise({ ...config, file, inheritFd: lock.inheritFd, pdeathsig: lock.commandDiesWithWrapper });
    let lostLock: string | null = null;
    lock.onLost((reason) => {
      lostLock = reason;
      if (config.onLockLoss === 'terminate') child.terminate(reason);
      else say.warn(`${config.name}: lock lost (${reason}); the command continues (--on-lock-loss continue)`);
    });
    if (child.pid !== null) await recorder.childStarted(child.pid);
    const verdict = judge(await child.result, config.timeoutMs, new Date(), lostLock);
    await recorder.finish(verdict.outcome);
    if (verdict.message) say.warn(`${config.name}: ${verdict.message}`);
    say.verbose(`${config.name}: ${verdict.outcome.status}, exit ${verdict.exitCode}`);
    return verdict.exitCode;
  } finally {
    await lock?.release();
    if (roundTrips() > 0) say.verbose(`${config.name}: ${roundTrips()} PostgreSQL round trips after connecting`);
    await close();
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function currentUser(): string | null {
  try {
    return userInfo().username;
  } catch {
    return process.env.LOGNAME ?? process.env.USER ?? String(process.geteuid?.() ?? '');
  }
}

// cron's own PATH, used when the environment has none.
const DEFAULT_PATH = '/usr/bin:/bin';

// Finds the program the way execvp(3) would, so a missing or non-executable command is
// reported (127 / 126) before any lock is taken or any run is recorded.
export function resolveCommand(command: string, path: string | undefined): string {
  if (command.includes('/')) {
    const why = unusable(command);
    if (why === 'missing') throw new CommandNotFoundError(command);
    if (why) throw new NotExecutableError(command, why);
    return command;
  }
  let refused: string | null = null;
  for (const dir of (path ?? DEFAULT_PATH).split(':')) {
    const candidate = join(dir || '.', command);
    const why = unusable(candidate);
    if (!why) return candidate;
    if (why !== 'missing') refused ??= why;
  }
  if (refused) throw new NotExecutableError(command, refused);
  throw new CommandNotFoundError(command);
}

function unusable(file: string): string | null {
  try {
    if (statSync(file).isDirectory()) return 'it is a directory';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'missing' : 'permission denied';
  }
  try {
    accessSync(file, constants.X_OK);
    return null;
  } catch {
    return 'permission denied';
  }
}
