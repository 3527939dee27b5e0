import { hostname } from 'node:os';
import { isatty } from 'node:tty';
import type { RunConfig } from '../cli/config.js';
import { backendOf, defaultFlockDir, mayBeShared, provesHoldersGone, recordedKey } from '../lock/lock-spec.js';
import type { AdmitOptions, Refused } from '../store/admission.js';
import { dueAfterMs } from '../store/jobs.js';
import { isShared } from '../store/log-spec.js';
import type { NewRun } from '../store/types.js';
import { type Messages, sleep } from '../util/io.js';
import { isSameProcess, newRunKey, processStart } from '../util/process-id.js';
import { masking } from '../util/redact.js';
import { SHARED_LOCK_DIR } from '../util/sharing.js';
import { monotonicMs } from '../util/time.js';
import { userName } from '../util/user.js';
import { type Attempts, LockGuard, runAttempts } from './attempts.js';
import { startable } from './command.js';
import type { Entry, Gate } from './gate/gate.js';
import { openGate } from './gate/open.js';
import { housekeep } from './housekeeping.js';
import { DueFirstGate, scheduledLook } from './loop/due.js';
import { RequestWatch } from './loop/watch.js';
import { recordedCommand } from './recorded.js';
import { skipped } from './skip.js';
import { Interrupted } from './stop/interrupted.js';
import { StopListener } from './stop/stop-listener.js';
import { FORWARDED } from './supervisor/supervisor.js';
import { discardSpareWatchdog } from './supervisor/watchdog.js';

// One invocation of `cronguard run`: admit (lock, pause, requests, interval, fleet rule,
// record), run (with retries), and with --every/--for again while the lock is held; then
// release. Returns the exit code; throws only typed errors.
// `fileEnv` is --env-file's variables, for the command alone (cli/secrecy.ts loadSecrets).
export async function runJob(config: RunConfig, fileEnv: Readonly<Record<string, string>> | null, say: Messages): Promise<number> {
  // Imported on demand: a run that masks nothing loads none of the code that would.
  const masker = masking() ? (await import('./supervisor/mask.js')).LineMasker : null;
  const manual = isatty(0);
  const run = newRun(config, manual);
  // At a terminal: another user's run of this job under a lock of its own (see private-note.ts).
  const defaultDir = manual ? defaultFlockDir(config.lock) : null;
  if (defaultDir) {
    const note = (await import('../lock/private-note.js')).privateLockNote(config.name, defaultDir.path === SHARED_LOCK_DIR);
    if (note) say.warn(note);
  }
  // A loop's window and period are durations: counted on the monotonic clock, which a step
  // of the wall clock (NTP) neither shortens nor lengthens.
  const invokedMs = monotonicMs();
  // Imported on demand: a run without --ping-url loads none of its code.
  const pinger = config.ping ? new (await import('./report/ping.js')).Pinger(config.ping, config.name, say) : null;
  // The same for --notify and --notify-url.
  const notifier = config.notify ? new (await import('./report/notify.js')).Notifier(config.notify, config.name, say) : null;
  const syslog = config.syslog ? new (await import('./report/syslog.js')).Syslog(config.syslog, config.name) : null;
  const file = await startable(config, run, say, { pinger, notifier, syslog }, fileEnv?.PATH ?? process.env.PATH);
  // A signal to cronguard stops whatever is not running yet: a wait for the lock, for a
  // retry, for the next run of a loop (one line, exit 128+N). A running command gets it
  // forwarded (the supervisor), and nothing new starts after it.
  const stop = new AbortController();
  // Kept to the process's end: a signal that comes once the command has ended and its outcome
  // is recorded cuts short what is left (housekeeping, closing), never the exit code, which
  // stays the command's; removed, it would kill the wrapper (128+N) after a recorded success.
  const onSignal = (signal: NodeJS.Signals) => stop.abort(signal);
  for (const signal of FORWARDED) process.on(signal, onSignal);
  const interrupted = (when: string) => new Interrupted(config.name, stop.signal.reason as NodeJS.Signals, when);
  let gate: Gate | null = null;
  let admission: Entry | null = null;
  let stopListener: StopListener | null = null;
  try {
    if (config.jitterMs > 0) await sleep(Math.random() * config.jitterMs, stop.signal);
    if (stop.signal.aborted) throw interrupted('before the command started; nothing ran');
    const notRun = (error: unknown) => {
      throw stop.signal.aborted ? interrupted('before the command started; nothing ran') : error;
    };
    const options = await admitOptions(config, manual);
    gate = await openGate({ ...config, waitMs: lockWaitMs(config, manual) }, run, options, say, stop.signal).catch(notRun);
    // Neither a shared lock nor a running copy is taken from anyone by a job that is not due;
    // replace.js is loaded with the flag only, as ping.js is.
    if (config.replace) gate = new (await import('./stop/replace.js')).ReplacingGate(gate, config, options, run, say);
    else if (mayBeShared(config.lock)) gate = new DueFirstGate(gate, config, options, run);
    gate.recorder.notifyWith(notifier);
    // A stop request ends the invocation as a signal would: no retry, no next run of a loop.
    stopListener = new StopListener(gate.recorder, isShared(config.log), (request) => {
      if (!stop.signal.aborted) stop.abort(request.signal);
    });
    admission = await gate.admit(stop.signal).catch(notRun);
    // Runs of a loop are spaced from here: at or after the first run's recorded start.
    const admittedAt = monotonicMs();
    const lock = admission.admitted ? admission.lock : admission.held;
    if (!lock) return await skipped(config, admission as Refused, gate.description, say, manual);
    // The runs it makes are recorded in the slot it holds (--max-running).
    const slotted: NewRun = { ...run, ...admission.slot };
    say.verbose(`${config.name}: holding ${gate.description}${config.maxRunning > 1 ? `, in slot ${slotted.slot}` : ''}`);
    const metrics = config.metricsDir === null ? null : new (await import('../metrics/textfile.js')).Textfile(config.metricsDir, config.name, say);
    const ctx: Attempts = { config, file, lock, guard: new LockGuard(lock, config, say), recorder: gate.recorder, say, pinger, syslog, stop: stop.signal, metrics, stopListener, fileEnv, masker: masker && (() => new masker()) };
    if (!admission.admitted) {
      // A loop that holds the lock waiting for work says as a single run would why it waits.
      if (admission.reason === 'unscheduled') await skipped(config, admission as Refused, gate.description, say, manual);
      return await repeat(ctx, gate, slotted, { invokedMs, admittedAt, firstAt: spacedFrom(admission as Refused, admittedAt, config) }, 0, scheduledLook(config, admission as Refused));
    }
    if (stop.signal.aborted) {
      await gate.recorder.finish(notStarted(stop.signal.reason, stopListener.request?.by ?? null), true);
      throw interrupted('before the command started; nothing ran');
    }
    const code = await runAttempts(ctx, slotted, admission.requests);
    return config.forMs === null || endsLoop(stop.signal, code) ? code : await repeat(ctx, gate, slotted, { invokedMs, admittedAt, firstAt: null }, code, scheduledLook(config, null));
  } finally {
    const ran = admission?.admitted || admission?.held;
    await (admission?.admitted ? admission.lock : admission?.held)?.release();
    if (gate && ran) await housekeep(gate.recorder, config, say);
    const trips = gate?.roundTrips();
    if (trips && trips.statements + trips.heartbeats > 0) {
      // Looks for a stop request go over the log's session, beside the run's own statements,
      // and are counted apart, as heartbeats are.
      const polls = isShared(config.log) ? (stopListener?.looks ?? 0) : 0;
      const statements = trips.statements - polls;
      const plural = (n: number, what: string) => (n > 0 ? ` + ${n} ${what}${n === 1 ? '' : 's'}` : '');
      say.verbose(`${config.name}: ${statements} ${trips.database} round trip${statements === 1 ? '' : 's'}${plural(trips.heartbeats, 'heartbeat')}${plural(polls, 'stop poll')} after connecting`);
    }
    discardSpareWatchdog();
    stopListener?.close();
    await gate?.close();
  }
}

// When a loop's invocation began and its first admission came (monotonicMs), and when its
// first run is due when that admission found the last one too recent (see spacedFrom).
interface LoopStart {
  readonly invokedMs: number;
  readonly admittedAt: number;
  readonly firstAt: number | null;
}

// A loop's first admission refused for the interval (the last run, of the invocation before,
// too recent: AdmitOptions.spacingMs, or --min-interval): its run is due once the interval
// since that run's start has passed, by the admission's own rule (dueAfterMs).
function spacedFrom(refusal: Refused, admittedAt: number, config: RunConfig): number | null {
  if (refusal.reason !== 'interval' || !refusal.lastStartedAt) return null;
  const interval = Math.max(config.everyMs ?? 0, config.minIntervalMs ?? 0);
  return admittedAt + Math.max(0, Date.parse(refusal.lastStartedAt) + dueAfterMs(interval) - Date.now());
}

// --every D --for W: holding the lock, start the command every D (start to start; a run
// longer than D delays the next, never overlaps) until W has passed, at once when a request
// comes; --on-request --for W: only for requests. The exit code is that of the last run
// that failed, if any did.
async function repeat(ctx: Attempts, gate: Gate, first: NewRun, at: LoopStart, firstCode: number, firstLook: number): Promise<number> {
  const { config } = ctx;
  // The window counts from the invocation: --for 1m ends as the next minute's invocation,
  // waiting for the lock (lockWaitMs), takes over.
  const deadline = at.invokedMs + (config.forMs as number);
  // The lock stays held between runs: said in the log (status, locks, the web page), since no
  // run is `running` meanwhile and an application's own try of the lock reads "busy".
  const holding = { host: first.host, pid: first.pid, until: new Date(Date.now() + deadline - monotonicMs()).toISOString(), lock: first.lockBackend, key: first.lockKey };
  await gate.recorder.consult('note the lock held between runs', (store) => store.setHolding(config.name, holding));
  try {
    return await runsOf(ctx, gate, first, at, firstCode, firstLook, deadline);
  } finally {
    await gate.recorder.consult('note the lock let go', (store) => store.setHolding(config.name, null));
  }
}

// The loop's runs, until `deadline` (monotonicMs).
async function runsOf(ctx: Attempts, gate: Gate, first: NewRun, at: LoopStart, firstCode: number, firstLook: number, deadline: number): Promise<number> {
  const { config, say, stop } = ctx;
  const watch = await RequestWatch.open(gate.recorder, config.name);
  const every = config.everyMs ?? Number.POSITIVE_INFINITY;
  let code = firstCode;
  let next = at.firstAt ?? at.admittedAt + every;
  let look = firstLook;
  for (;;) {
    await watch.until(Math.min(next, look, deadline), stop);
    if (stop.aborted) throw new Interrupted(config.name, stop.reason as NodeJS.Signals, 'while waiting for the next run');
    if (ctx.guard.lost) {
      say.warn(`${config.name}: lock lost (${ctx.guard.lost}) while waiting for the next run; no further runs`);
      return code;
    }
    if (monotonicMs() >= deadline) return code;
    const now = new Date();
    const run: NewRun = { ...first, trigger: first.trigger === 'manual' ? 'manual' : 'cron', tick: null, runKey: newRunKey(), invokedAt: now, startedAt: now };
    const verdict = await gate.readmit(run);
    // The period keeps its own clock: a run at (or past) its time moves it on, a period after
    // the run's start (whose recorded start lies before this moment); a run for a request in
    // between does not, or requests coming more often than the period would hold its runs
    // off for good.
    if (monotonicMs() >= next) next = monotonicMs() + every;
    if (verdict.admitted) {
      const result = await runAttempts(ctx, run, verdict.requests);
      if (endsLoop(stop, result)) return result;
      if (result !== 0) code = result;
    }
    look = scheduledLook(config, verdict.admitted ? null : verdict);
    // Said once a day, in a loop as by single runs (see skipped).
    if (!verdict.admitted && verdict.reason === 'unscheduled') await skipped(config, verdict, gate.description, say, false);
    if (!verdict.admitted && verdict.reason === 'disabled') {
      await skipped(config, verdict, gate.description, say, false);
      return code;
    }
  }
}

// A loop (--for) that finds the lock held waits for it a while instead of skipping: the
// holder is most likely the loop of the minute before, whose window (`--for 1m`) ends as this
// one's begins, and taking over at once leaves no second of the minute unserved. Someone at
// a terminal is told at once instead.
const HANDOVER_MS = 10_000;

// --replace waits this long for the lock once the run it replaced has ended: that run's
// wrapper records its end before it lets the lock go, so only that last step is left.
const REPLACE_LOCK_WAIT_MS = 5000;

function lockWaitMs(config: RunConfig, manual: boolean): number {
  if (config.replace) return Math.max(config.waitMs, REPLACE_LOCK_WAIT_MS);
  if (config.forMs === null || manual) return config.waitMs;
  return Math.max(config.waitMs, Math.min(HANDOVER_MS, config.forMs));
}

// The rules an admission applies, from the configuration. --scheduled loads its cron reader.
async function admitOptions(config: RunConfig, manual: boolean): Promise<AdmitOptions> {
  // Rows under this same lock (the slot the run holds) are gone when holding it proves so;
  // others when their wrapper process is.
  const sameLock = provesHoldersGone(config.lock);
  return {
    oneRunPerTick: !manual && !config.everyTick,
    isGone: (row, run) => (sameLock && row.lock_backend === run.lockBackend && row.lock_key === run.lockKey) || !isSameProcess(row.pid, row.wrapper_start),
    minIntervalMs: config.minIntervalMs,
    // A loop's first run keeps its period after the last one, the previous invocation's.
    spacingMs: config.everyMs,
    onRequest: config.onRequest,
    batch: config.batch,
    batchMax: config.batchMax,
    manual,
    keepLock: config.forMs !== null,
    scheduled: config.scheduled ? (await import('../schedule/rule.js')).scheduledRule() : null,
  };
}

function newRun(config: RunConfig, manual: boolean): NewRun {
  const invokedAt = new Date();
  return {
    job: config.name,
    trigger: manual ? 'manual' : 'cron',
    attempt: 1,
    host: hostname(),
    pid: process.pid,
    username: userName(),
    command: recordedCommand(config, config.display),
    // Until the lock is taken; the gate stamps the moment it is.
    startedAt: invokedAt,
    invokedAt,
    tick: manual ? null : minuteOf(invokedAt),
    lockBackend: backendOf(config.lock),
    lockKey: recordedKey(config.lock),
    slot: 0,
    maxRunning: config.maxRunning,
    runKey: newRunKey(),
    wrapperStart: processStart(process.pid),
  };
}

// A run admitted, and recorded, just as a signal or a stop request (`by` whom) came: it ends
// without its command.
function notStarted(signal: NodeJS.Signals, by: string | null) {
  const error = `stopped by ${by ?? signal} before the command started`;
  return { status: 'killed', finishedAt: new Date(), durationMs: 0, exitCode: null, signal, output: null, outputTruncated: false, error } as const;
}

// A signal that came while a loop's run went on ends the loop with that run: its summary
// line (killed by the forwarded signal, or failed) said it all, and the exit is the run's.
// One that came when the command had already succeeded is the loop's own: one line, 128+N.
function endsLoop(stop: AbortSignal, code: number): boolean {
  return stop.aborted && code !== 0;
}

// The tick: the minute the invocation started in. Every time zone's offset is whole minutes,
// so the local minute and the UTC minute begin at the same instant.
function minuteOf(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 60_000) * 60_000);
}
