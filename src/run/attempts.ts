import type { RunConfig } from '../cli/config.js';
import { quote } from '../cli/config.js';
import { EXIT } from '../errors.js';
import type { Lock } from '../lock/backend.js';
import type { Textfile } from '../metrics/textfile.js';
import { describePause, type Paused, pauseOf, resumeHint } from '../store/jobs.js';
import { isRecorded } from '../store/log-spec.js';
import type { ClaimedRequest, SettledRequest, Unserved } from '../store/requests.js';
import type { NewRun, RunOutcome } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import { type Messages, setStderrMidLine, sleep } from '../util/io.js';
import { printable } from '../util/printable.js';
import { newRunKey } from '../util/process-id.js';
import { maskSecrets } from '../util/redact.js';
import { type Judgement, judge } from './outcome.js';
import { recordedCommand } from './recorded.js';
import type { RunRecorder } from './recorder.js';
import type { Pinger } from './report/ping.js';
import type { Syslog, SyslogRun } from './report/syslog.js';
import type { ResultsFile } from './results.js';
import { Interrupted } from './stop/interrupted.js';
import type { StopListener } from './stop/stop-listener.js';
import { argumentRoom, fitRequests } from './supervisor/arg-limits.js';
import { LiveCopy } from './supervisor/live.js';
import type { LineMasker } from './supervisor/mask.js';
import type { QuietBuffer } from './supervisor/quiet.js';
import { replayHeld } from './supervisor/relay.js';
import { fileEndsMidLine } from './supervisor/sink.js';
import { type ChildResult, type Supervision, supervise } from './supervisor/supervisor.js';

// How long a command whose lock was lost gets between the kill signal and SIGKILL.
export const LOCK_LOSS_GRACE_MS = 2000;
const MAX_RETRY_DELAY_MS = 3_600_000;

export interface Attempts {
  readonly config: RunConfig;
  readonly file: string;
  readonly lock: Lock;
  readonly guard: LockGuard;
  readonly recorder: RunRecorder;
  readonly say: Messages;
  // --ping-url: reports each run's start and end.
  readonly pinger: Pinger | null;
  // --syslog: a line at each attempt's start and end.
  readonly syslog: Syslog | null;
  // Aborted by a signal to cronguard: no further attempt starts.
  readonly stop: AbortSignal;
  // The Prometheus textfile (--metrics-dir), rewritten as each attempt starts and ends.
  readonly metrics: Textfile | null;
  // --env-file's variables, for the command alone; null without one.
  readonly fileEnv: Readonly<Record<string, string>> | null;
  // A masker per output stream (--redact, --env-file); null when nothing is masked.
  readonly masker: (() => LineMasker) | null;
  // Stop requests (cronguard stop, --replace) reach the running command through it.
  readonly stopListener: StopListener | null;
}

// What happens to the running command when the lock is lost; registered once per lock.
export class LockGuard {
  lost: string | null = null;
  current: Supervision | null = null;

  constructor(lock: Lock, config: RunConfig, say: Messages) {
    lock.onLost((reason) => {
      this.lost = reason;
      // Another instance may take the lock any moment now: the grace before SIGKILL is
      // short, whatever --kill-after says.
      const grace = Math.min(config.killAfterMs, LOCK_LOSS_GRACE_MS, lock.lossGraceMs ?? LOCK_LOSS_GRACE_MS);
      if (config.onLockLoss === 'terminate') this.current?.terminate(reason, grace);
      else if (this.current) say.warn(`${config.name}: lock lost (${reason}); the command continues (--on-lock-loss continue)`);
    });
  }
}

// Runs one admitted run: the command (with the arguments of the requests it serves), and on
// failure, with --retries, again after a doubling delay, each attempt a row of its own,
// holding the lock throughout. Returns the exit code of the last attempt. A monitor hears of
// the run as a whole: its start when the first attempt starts, its end after the last, so
// a failure that a retry makes good raises no alert.
export async function runAttempts(ctx: Attempts, run: NewRun, claimed: readonly ClaimedRequest[]): Promise<number> {
  const { config, say } = ctx;
  // A batch's retry serves only the requests that failed (see ResultsFile).
  let requests = await served(ctx, claimed);
  if (claimed.length > 0 && requests.length === 0 && config.onRequest) return nothingToServe(ctx);
  const ping = ctx.pinger?.run(run.runKey) ?? null;
  const { guard } = ctx;
  let current = run;
  const { lock } = ctx;
  // -q: one buffer for every attempt, shown only if the last one fails (see QuietBuffer);
  // loaded with -q only.
  const held = config.quiet ? new (await import('./supervisor/quiet.js')).QuietBuffer() : null;
  for (let attempt = 1; ; attempt++) {
    const argv = [...config.argv, ...argumentsOf(requests, config.batch)];
    const command = recordedCommand(config, argv.length === config.argv.length ? config.display : `${config.display} ${argv.slice(config.argv.length).map(quote).join(' ')}`);
    // A batch's results by argument: loaded with a batch that serves requests only.
    const results = config.batch && requests.length > 0 ? (await import('./results.js')).ResultsFile.create() : null;
    const judgementOf = (result: ChildResult) => judge(endedBy(result, guard.lost, config), { ...config, lockLostWhileRunning: guard.lost }, new Date());
    const mayRetry = (judgement: Judgement) => attempt <= config.retries && guard.lost === null && !ctx.stop.aborted && retryable(judgement, config);
    // A lease may have lapsed while cronguard was stopped, since it was last refreshed;
    // nothing runs yet, so its database may say it has not.
    await lock.verify('start');
    if (guard.lost !== null) {
      await endHolding(ctx, held, true);
      return lostBeforeStart(ctx, guard.lost);
    }
    // Each attempt is a run of its own, with its own key, so its own live copy.
    const live = !isRecorded(config.log) ? null : new LiveCopy(config.stateDir, current.runKey, config.name, say);
    ctx.recorder.serving(requests.map((r) => r.id));
    const showHeld = (ended: ChildResult) => failed(judgementOf(ended)) && !mayRetry(judgementOf(ended));
    // Imported on demand (none of its code without --fail-on-stderr); PS4 is the command's, an env file's first.
    const stderrRule = config.failOnStderr ? new (await import('./stderr-rule.js')).StderrRule(ctx.fileEnv?.PS4 ?? config.failOnStderr.ps4) : null;
    const env = { ...lock.env, CRONGUARD_SLOT: String(run.slot), ...results?.env(requests) };
    const child = supervise({ ...config, argv, file: ctx.file, inheritFd: lock.inheritFd, dieWithWrapper: lock.commandDiesWithWrapper, heartbeat: lock.heartbeat, env, fileEnv: ctx.fileEnv, masker: ctx.masker, live, say, held, showHeld, stderrRule });
    guard.current = child;
    ctx.stopListener?.begin(child);
    if (attempt === 1 && child.pid !== null) ping?.start();
    // A command that could not start gets its end line only: nothing started.
    const logged: SyslogRun = { ...current, runId: ctx.recorder.runId };
    if (child.pid !== null) ctx.syslog?.start(logged);
    // Recorded while the command runs: nothing waits for it but the outcome.
    const started = (async () => {
      if (child.pid !== null) await ctx.recorder.childStarted(child.pid, command);
      await ctx.metrics?.update(ctx.recorder.openStore);
    })();
    const result = await child.result;
    ctx.stopListener?.end();
    await started;
    // A log file tells where it ends, even what the command wrote to it unseen (--capture 0).
    const inFile = fileEndsMidLine(2);
    if (inFile !== null) setStderrMidLine(inFile);
    guard.current = null;
    // All of the output is in the live copy before the outcome is recorded, and the copy
    // goes only after: a follower that sees the run end has everything left to read.
    await live?.drained();
    // Or while the command ran: its watchdog then stopped the command, for the lease.
    await lock.verify('end');
    const whole = judgementOf(result);
    const split = results ? await byArgument(ctx, results, requests, whole) : null;
    results?.remove();
    const judgement = split?.judgement ?? whole;
    // By argument, a retry serves the requests that failed (if any failed the same command
    // might not fail again); else the whole run is retried or not.
    const again = split ? split.failed.length > 0 && (whole.outcome.status === 'succeeded' || mayRetry(whole)) && attempt <= config.retries && guard.lost === null && !ctx.stop.aborted : mayRetry(judgement);
    if (split) await settle(ctx, split, again, whole.exitCode);
    if (split && again) requests = split.failed.map((f) => f.request);
    if (!again) await endHolding(ctx, held, failed(judgement));
    // The last outcome of an invocation that keeps no lock for later takes the lock with it.
    await ctx.recorder.finish(judgement.outcome, !again, !again && config.forMs === null && guard.lost === null);
    live?.remove();
    await ctx.metrics?.update(ctx.recorder.openStore);
    // Before the summary line, which stays the run's last word.
    const pingWarning = again ? null : await ping?.finish(judgement.exitCode, result.output);
    const syslogWarning = (await ctx.syslog?.end(logged, judgement.outcome)) ?? null;
    const delay = Math.min(config.retryDelayMs * 2 ** (attempt - 1), MAX_RETRY_DELAY_MS);
    if (result.replayNote) say.warn(`${config.name}: ${result.replayNote}`);
    if (pingWarning) say.warn(pingWarning);
    if (syslogWarning) say.warn(syslogWarning);
    if (judgement.summary) {
      const next = again ? `; retrying in ${formatDuration(delay)} (attempt ${attempt + 1} of ${config.retries + 1})` : '';
      const line = `${summaryLine(config.name, judgement.summary, ctx.recorder.runId)}${next}`;
      // Under -q, that a retry is coming is said only if it fails too.
      if (again && held !== null) held.note(line);
      else say.warn(line);
    }
    say.verbose(`${config.name}: ${judgement.outcome.status}, exit ${judgement.exitCode}`);
    if (!again) return judgement.exitCode;
    await sleep(delay, ctx.stop);
    if (ctx.stop.aborted) {
      // The attempt was recorded as one more to come; it is the last after all.
      await ctx.recorder.finish(judgement.outcome, true);
      await endHolding(ctx, held, true);
      const interrupted = new Interrupted(config.name, ctx.stop.reason as NodeJS.Signals, 'while waiting to retry');
      const warning = await ping?.finish(interrupted.exitCode, result.output);
      if (warning) say.warn(warning);
      throw interrupted;
    }
    current = { ...run, attempt: attempt + 1, trigger: 'retry', command, runKey: newRunKey(), startedAt: new Date() };
    // A job paused meanwhile gets no more attempts: the one that failed is its last.
    const paused = await pausedBeforeRetry(ctx, current, judgement.outcome);
    if (paused) {
      await endHolding(ctx, held, true);
      const warning = await ping?.finish(judgement.exitCode, result.output);
      if (warning) say.warn(warning);
      say.warn(`${config.name}: not retrying: ${describePause(paused)} (${resumeHint(config.name, paused)})`);
      return judgement.exitCode;
    }
  }
}

function failed(judgement: Judgement): boolean {
  return judgement.outcome.status !== 'succeeded';
}

// The end of -q's holding, with the invocation's last attempt: what it held is shown if
// that attempt failed (unless the attempt's own replay showed it already), else let go.
async function endHolding(ctx: Attempts, held: QuietBuffer | null, lastFailed: boolean): Promise<void> {
  if (held === null) return;
  const note = lastFailed && held.holding ? await replayHeld(held, ctx.config.name, ctx.say) : null;
  if (note) ctx.say.warn(`${ctx.config.name}: ${note}`);
  held.dispose();
}

// A lock lost while the command ran ends the run as lock_lost (75) under --on-lock-loss
// terminate, whoever stopped the command: cronguard, or the watchdog of a lease that lapsed
// while cronguard was stopped (cronguard finds out when it runs again).
function endedBy(result: ChildResult, lost: string | null, config: RunConfig): ChildResult {
  const unseen = lost !== null && result.terminatedBecause === null && config.onLockLoss === 'terminate';
  return unseen ? { ...result, terminatedBecause: lost } : result;
}

// The lock was gone before the command could start (a lease that lapsed while cronguard
// was stopped): the attempt ends unrun, one line, 75.
async function lostBeforeStart(ctx: Attempts, lost: string): Promise<number> {
  const error = `lock lost before the command started (${lost}); nothing ran`;
  const outcome = { status: 'lock_lost', finishedAt: new Date(), durationMs: 0, exitCode: null, signal: null, output: null, outputTruncated: false, error } as const;
  await ctx.recorder.finish(outcome, true);
  ctx.say.warn(summaryLine(ctx.config.name, error, ctx.recorder.runId));
  return EXIT.lockLost;
}

// The claimed requests whose arguments fit the command line (see fitRequests); the others
// go back, to wait for the next run or to end failed, and a refusal is said in one line.
// A request with malformed arguments (see claimedRequest) ends failed, never run half.
async function served(ctx: Attempts, claimed: readonly ClaimedRequest[]): Promise<readonly ClaimedRequest[]> {
  const sound = claimed.filter((r) => r.malformed === undefined);
  for (const r of claimed) if (r.malformed !== undefined) await giveBack(ctx, { later: [], refused: [r.id], reason: r.malformed });
  if (!sound.some((r) => r.args.length > 0)) return sound;
  const { fit, unserved } = fitRequests(sound, argumentRoom(ctx.config.argv, { ...process.env, ...ctx.fileEnv }), ctx.config.batch);
  await giveBack(ctx, unserved);
  return fit;
}

// Hands the store back what this run does not serve, and says so: a refusal in one line
// (cron mails it), requests left for the next run only with -v.
async function giveBack(ctx: Attempts, unserved: Unserved): Promise<void> {
  if (unserved.later.length === 0 && unserved.refused.length === 0) return;
  const runId = ctx.recorder.runId;
  if (runId !== null) await ctx.recorder.consult('give back requests', (store) => store.returnRequests(runId, unserved));
  if (unserved.later.length > 0) ctx.say.verbose(`${ctx.config.name}: ${unserved.later.length} requests wait for the next run: the command line is full`);
  if (unserved.refused.length > 0) ctx.say.warn(`${ctx.config.name}: request ${unserved.refused.join(', ')} failed without running: ${unserved.reason}`);
}

// A run only for requests (--on-request) none of which can be served: the command does not
// start without the arguments it was asked to run with.
async function nothingToServe(ctx: Attempts): Promise<number> {
  const error = 'no request it claimed can be served (see the requests); nothing ran';
  const outcome = { status: 'failed', finishedAt: new Date(), durationMs: 0, exitCode: null, signal: null, output: null, outputTruncated: false, error } as const;
  await ctx.recorder.finish(outcome, true);
  ctx.say.warn(summaryLine(ctx.config.name, error, ctx.recorder.runId));
  return EXIT.usage;
}

// A batch's attempt as its results file tells it, by request: those that succeeded, those
// that failed (with a reason, or the run's outcome for a request the file did not mention),
// and the judgement of the attempt: failed (exit 1) when any request failed though the command
// exited 0, naming them. Null when the file named no request: the batch is one outcome.
interface Split {
  readonly succeeded: readonly ClaimedRequest[];
  readonly failed: readonly { readonly request: ClaimedRequest; readonly reason: string | null }[];
  readonly judgement: Judgement;
}

async function byArgument(ctx: Attempts, file: ResultsFile, requests: readonly ClaimedRequest[], whole: Judgement): Promise<Split | null> {
  const { byId, stray } = file.read(requests);
  if (stray.length > 0) {
    ctx.say.warn(`${ctx.config.name}: CRONGUARD_RESULTS: ${stray.length} line${stray.length === 1 ? '' : 's'} naming no argument of this attempt (${requests.length === 1 ? 'its argument' : 'its arguments'}, or #ID) as ARG<TAB>ok|failed[<TAB>REASON], ignored: '${printable(maskSecrets(stray[0] as string)).slice(0, 80)}'${stray.length > 1 ? ', ...' : ''}`);
  }
  if (byId.size === 0) return null;
  const wholeOk = whole.outcome.status === 'succeeded';
  const succeeded = requests.filter((r) => byId.get(r.id)?.ok ?? wholeOk);
  const failed = requests.filter((r) => !(byId.get(r.id)?.ok ?? wholeOk)).map((request) => ({ request, reason: byId.get(request.id)?.reason ?? null }));
  if (failed.length === 0 || !wholeOk) return { succeeded, failed, judgement: whole };
  const named = failed.map((f) => `${f.request.args.length > 0 ? printable(maskSecrets(f.request.args.join(' '))) : `#${f.request.id}`}${f.reason ? ` (${f.reason})` : ''}`);
  const error = `${failed.length} of ${requests.length} requests failed: ${named.join(', ')}`.slice(0, 1000);
  return { succeeded, failed, judgement: { exitCode: REQUESTS_FAILED_EXIT, outcome: { ...whole.outcome, status: 'failed', error }, summary: `failed: ${error} (the command exited 0)` } };
}

// A batch whose command exited 0 but said some requests failed exits 1, as a rule's failure does.
const REQUESTS_FAILED_EXIT = 1;

// Ends the requests whose outcome is known now: those that succeeded, and (on the last
// attempt) those that failed, each with its reason; a retry's requests stay with the run.
async function settle(ctx: Attempts, split: Split, again: boolean, exitCode: number): Promise<void> {
  const runId = ctx.recorder.runId;
  if (runId === null) return;
  const settled: SettledRequest[] = [
    ...split.succeeded.map((r) => ({ id: r.id, status: 'succeeded' as const, exitCode, error: null })),
    ...(again ? [] : split.failed.map((f) => ({ id: f.request.id, status: 'failed' as const, exitCode, error: f.reason }))),
  ];
  if (settled.length > 0) await ctx.recorder.consult('end the requests by their results', (store) => store.settleRequests(runId, settled));
}

// The arguments the served requests add: all of them in order (--batch), else those of
// the one request with arguments a run serves.
function argumentsOf(requests: readonly ClaimedRequest[], batch: boolean): string[] {
  if (batch) return requests.flatMap((r) => r.args);
  return [...(requests.find((r) => r.args.length > 0)?.args ?? [])];
}

// A failure the same command might not repeat: a non-zero exit (not 126/127: a command
// that cannot start will not start on a second try), a timeout with --retry-on-timeout.
function retryable(judgement: Judgement, config: RunConfig): boolean {
  const { status, exitCode } = judgement.outcome;
  if (status === 'timed_out') return config.retryOnTimeout;
  return status === 'failed' && exitCode !== 126 && exitCode !== 127;
}

// The one line a run that did not succeed ends with, so cron mails it even when the command
// printed nothing.
export function summaryLine(name: string, summary: string, runId: number | null): string {
  return `${name}: ${summary}${runId === null ? '' : ` (run ${runId}; cronguard logs ${runId})`}`;
}

// Whether a job paused (`disable NAME`, `disable --all`) before its next attempt (--retries)
// could start; if so, the attempts end here, recorded, and this is the pause.
//
// It is looked for before the next attempt's row is recorded, and again after: a pause
// committed between the first look and that row left a `disable --drain` begun after it no
// row `running` to see (the last attempt had ended, the next was not there yet), so it said
// drained, and the attempt would have started after it. A pause after the second look finds
// the row, and its drain waits for the attempt. Found by the second look, the attempt is
// recorded as not started, with the outcome of the one before it (the invocation's own).
async function pausedBeforeRetry(ctx: Attempts, next: NewRun, last: RunOutcome): Promise<Paused | null> {
  const early = await pausedNow(ctx);
  if (early) {
    // The attempt was recorded as one more to come; it is the last after all.
    await ctx.recorder.finish(last, true);
    return early;
  }
  await ctx.recorder.retry(next);
  const late = await pausedNow(ctx);
  if (late) {
    const error = `not started: the job was paused as attempt ${next.attempt} was recorded; attempt ${next.attempt - 1}'s outcome stands`;
    await ctx.recorder.finish({ ...last, finishedAt: new Date(), durationMs: 0, output: null, outputTruncated: false, error }, true);
  }
  return late;
}

// The job's pause, its own or the fleet's, now (null: not paused, or the log out of reach).
async function pausedNow(ctx: Attempts): Promise<Paused | null> {
  const [status] = (await ctx.recorder.consult('look for a pause', (store) => store.jobStatus(ctx.config.name))) ?? [];
  return status ? pauseOf(status) : null;
}
