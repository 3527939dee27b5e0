import { accessSync, constants as fs, statSync } from 'node:fs';
import { constants, hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import { isatty } from 'node:tty';
import type { RunConfig } from '../cli/config.js';
import { CommandNotFoundError, CronguardError, NotExecutableError } from '../errors.js';
import type { Holder, NewRun, RunningRow } from '../store/types.js';
import { isSameProcess, newRunKey, processStart } from '../util/process-id.js';
import type { Messages } from '../util/io.js';
import { judge } from './outcome.js';
import { FORWARDED, supervise } from './supervisor.js';
import { type Admission, type Gate, openGate, openRecorder } from './wiring.js';

// One invocation of `cronguard run`: admit (lock, fleet rule, record), supervise, record,
// release. Returns the exit code; throws only typed errors for problems found before
// anything ran.
export async function runJob(config: RunConfig, say: Messages): Promise<number> {
  const manual = isatty(0);
  const invokedAt = new Date();
  const lockKey = lockKeyOf(config);
  const run: NewRun = {
    job: config.name,
    trigger: manual ? 'manual' : 'cron',
    attempt: 1,
    host: hostname(),
    pid: process.pid,
    username: currentUser(),
    command: config.display,
    // Until the lock is taken; the gate stamps the moment it is.
    startedAt: invokedAt,
    invokedAt,
    tick: manual ? null : minuteOf(invokedAt),
    lockBackend: config.lock,
    lockKey,
    runKey: newRunKey(),
    wrapperStart: processStart(process.pid),
  };
  // Holding a local lock proves that whatever held this same lock before has ended, pid
  // reused or not; other rows are gone when their wrapper process is.
  const sameLock = config.lock === 'flock' || config.lock === 'lockfile';
  const isGone = (row: RunningRow) =>
    (sameLock && row.lock_backend === config.lock && row.lock_key === lockKey) || !isSameProcess(row.pid, row.wrapper_start);
  const file = await startable(config, run, say);
  // Until the command runs, a signal stops cronguard cleanly: it ends a wait for the lock,
  // runs nothing, and exits 128+N with one line. Then the supervisor forwards signals.
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => stop.abort(new Interrupted(config.name, signal));
  for (const signal of FORWARDED) process.on(signal, onSignal);
  let admission: Admission | null = null;
  let gate: Awaited<ReturnType<typeof openGate>> | null = null;
  try {
    gate = await openGate(config, run, { oneRunPerTick: !manual && !config.everyTick, isGone }, say);
    admission = await gate.admit(stop.signal);
    for (const signal of FORWARDED) process.off(signal, onSignal);
    if (!admission.admitted) return await skipped(config, admission, gate.description, say);
    if (stop.signal.aborted) return await abandonAdmitted(gate, stop.signal.reason as Interrupted);
    const { lock } = admission;
    say.verbose(`${config.name}: holding ${gate.description}`);
    const child = supervise({ ...config, file, inheritFd: lock.inheritFd, dieWithWrapper: lock.commandDiesWithWrapper });
    let lostLock: string | null = null;
    lock.onLost((reason) => {
      lostLock = reason;
      // Another instance may take the lock any moment now: the grace before SIGKILL is
      // short, whatever --kill-after says.
      if (config.onLockLoss === 'terminate') child.terminate(reason, Math.min(config.killAfterMs, LOCK_LOSS_GRACE_MS));
      else say.warn(`${config.name}: lock lost (${reason}); the command continues (--on-lock-loss continue)`);
    });
    if (child.pid !== null) await gate.recorder.childStarted(child.pid);
    const result = await child.result;
    const verdict = judge(result, { ...config, lockLostWhileRunning: lostLock }, new Date());
    await gate.recorder.finish(verdict.outcome);
    if (verdict.summary) {
      if (result.endsMidLine) process.stderr.write('\n');
      say.warn(summaryLine(config.name, verdict.summary, gate.recorder.runId));
    }
    say.verbose(`${config.name}: ${verdict.outcome.status}, exit ${verdict.exitCode}`);
    return verdict.exitCode;
  } finally {
    for (const signal of FORWARDED) process.off(signal, onSignal);
    if (admission?.admitted) await admission.lock.release();
    const trips = gate?.roundTrips() ?? 0;
    if (trips > 0) say.verbose(`${config.name}: ${trips} PostgreSQL round trip${trips === 1 ? '' : 's'} after connecting`);
    await gate?.close();
  }
}

// A signal that came while the lock and the record were being taken: the run is recorded
// as killed before it started, and nothing runs.
async function abandonAdmitted(gate: Gate, interrupted: Interrupted): Promise<never> {
  const outcome = { status: 'killed', finishedAt: new Date(), durationMs: 0, exitCode: null, signal: interrupted.signal, output: null, outputTruncated: false, error: interrupted.message } as const;
  await gate.recorder.finish(outcome);
  throw interrupted;
}

// cronguard got a signal before the command started.
export class Interrupted extends CronguardError {
  constructor(
    name: string,
    readonly signal: NodeJS.Signals,
  ) {
    super(`${name}: stopped by ${signal} before the command started; nothing ran`, 128 + ((constants.signals as Record<string, number>)[signal] ?? 0));
  }
}

// How long a command whose lock was lost gets between the kill signal and SIGKILL.
export const LOCK_LOSS_GRACE_MS = 2000;

// The program to run, found before any lock is taken. One that cannot start still leaves a
// `failed` row, so a misconfigured job shows up in history and to `check`.
async function startable(config: RunConfig, run: NewRun, say: Messages): Promise<string> {
  try {
    return resolveCommand(config.argv[0] as string, process.env.PATH);
  } catch (error) {
    if (!(error instanceof CommandNotFoundError || error instanceof NotExecutableError)) throw error;
    const recorder = await openRecorder(config, say);
    const outcome = { status: 'failed', finishedAt: new Date(), durationMs: 0, exitCode: error.exitCode, signal: null, output: null, outputTruncated: false, error: error.message } as const;
    // It took no lock, so it claims no tick.
    await recorder.unstartable({ ...run, tick: null }, outcome);
    await recorder.close();
    throw new CronguardError(summaryLine(config.name, error.message, recorder.runId), error.exitCode);
  }
}

// Why this invocation did not run, for -v; the exit code says it was a skip.
async function skipped(config: RunConfig, refusal: Admission & { admitted: false }, lock: string, say: Messages): Promise<number> {
  if (refusal.reason === 'tick') {
    say.verbose(`${config.name}: already ran this minute on ${describeHolder(refusal.holder)}; skipping with exit 0 (--every-tick runs every host)`);
    return 0;
  }
  if (config.verbose) {
    let holder = describeHolder(refusal.holder);
    if (refusal.holder === null && config.lock === 'flock') {
      const { LocalLocks } = await import('../lock/held.js');
      const pid = new LocalLocks().holder('flock', config.lockPath);
      if (pid) holder = `pid ${pid} (from /proc/locks)`;
    }
    say.verbose(`${config.name}: ${lock} is held by ${holder}; skipping with exit ${config.conflictExitCode}`);
  }
  return config.conflictExitCode;
}

function describeHolder(holder: Holder | null): string {
  if (!holder) return 'another instance';
  const run = holder.runId === null ? '' : `, run ${holder.runId}`;
  return `host ${holder.host ?? '?'} (pid ${holder.pid ?? '?'}${run}, since ${holder.startedAt ?? '?'})`;
}

// The one line a run that did not succeed ends with, so cron mails it even when the command
// printed nothing.
export function summaryLine(name: string, summary: string, runId: number | null): string {
  return `${name}: ${summary}${runId === null ? '' : ` (run ${runId}; cronguard logs ${runId})`}`;
}

// The tick: the minute the invocation started in. Every time zone's offset is whole minutes,
// so the local minute and the UTC minute begin at the same instant.
function minuteOf(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 60_000) * 60_000);
}

// What the run row records as its lock, for `cronguard locks`.
function lockKeyOf(config: RunConfig): string | null {
  switch (config.lock) {
    case 'flock':
      return config.lockPath;
    case 'lockfile':
      return join(config.lockDir as string, `${config.name}.lockdir`);
    case 'postgres':
      return String(config.lockKey);
    case 'none':
      return null;
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
    accessSync(file, fs.X_OK);
    return null;
  } catch {
    return 'permission denied';
  }
}
