import { type StdioOptions, spawn } from 'node:child_process';
import type { Heartbeat } from '../../lock/backend.js';
import type { StopRequest } from '../../store/types.js';
import { type Messages, setLongTimeout } from '../../util/io.js';
import { monotonicMs } from '../../util/time.js';
import type { StderrRule } from '../stderr-rule.js';
import { ProcessGroup } from './group.js';
import type { LiveCopy } from './live.js';
import type { LineMasker } from './mask.js';
import { TailBuffer } from './output.js';
import type { QuietBuffer } from './quiet.js';
import { Relay } from './relay.js';
import { Watchdog } from './watchdog.js';

export interface SuperviseOptions {
  readonly file: string;
  readonly argv: readonly string[];
  readonly inheritFd: number | null;
  readonly timeoutMs: number | null;
  readonly killSignal: NodeJS.Signals;
  readonly killAfterMs: number;
  // -q: where the output is held, by the caller across attempts (see runAttempts), and
  // whether, once the command has exited, all it holds is shown now: not while a retry
  // may still mend this attempt's failure.
  readonly held: QuietBuffer | null;
  readonly showHeld: (ended: ChildResult) => boolean;
  readonly captureBytes: number;
  // --fail-on-stderr: what watches this attempt's stderr (loaded with the flag only); null
  // without it.
  readonly stderrRule: StderrRule | null;
  // The lock dies with cronguard, so the command's group must too (see Watchdog).
  readonly dieWithWrapper: boolean;
  // Where the output is copied for `logs -f` while the command runs; null without a run log.
  readonly live: LiveCopy | null;
  readonly heartbeat?: Heartbeat | null;
  // Variables the lock adds to the command's environment (a lease's fencing token).
  readonly env?: Readonly<Record<string, string>> | null;
  // --env-file's variables: over cronguard's own environment, under the lock's and CRONGUARD_PID.
  readonly fileEnv?: Readonly<Record<string, string>> | null;
  // --redact, --env-file: a masker per stream; the output then always passes through
  // cronguard (even with --capture 0), as it could not be masked otherwise.
  readonly masker?: (() => LineMasker) | null;
  // The job's name and cronguard's voice, for a warning that its output could not be written.
  readonly name: string;
  readonly say: Messages;
}

// What became of the command, success or not, in one shape (as execa's result).
export interface ChildResult {
  readonly pid: number | null;
  readonly exitCode: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly timedOut: boolean;
  readonly escalated: boolean;
  readonly forwardedSignal: NodeJS.Signals | null;
  readonly terminatedBecause: string | null;
  // Who stopped the run (cronguard stop, --replace), as its stop request says; null if nobody.
  readonly stoppedBy: string | null;
  readonly spawnError: NodeJS.ErrnoException | null;
  readonly durationMs: number;
  readonly output: string | null;
  readonly outputTruncated: boolean;
  // Why output was not drained to its end, for the run log; null when it was.
  readonly outputNote: string | null;
  // What a -q replay could not show (its held output did not fit anywhere), for stderr and
  // the run log; null when it showed everything, or there was none.
  readonly replayNote: string | null;
  // --fail-on-stderr: the first line of stderr that is not a shell's trace, if any.
  readonly stderrLine: string | null;
}

export interface Supervision {
  readonly pid: number | null;
  // Stops the command's whole process group (signal, then SIGKILL), e.g. on lock loss.
  terminate(reason: string, graceMs?: number): void;
  // A stop request (see StopListener): its signal to the group, SIGKILL after kill-after.
  stop(request: StopRequest): void;
  readonly result: Promise<ChildResult>;
}

export const FORWARDED: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'];

// Runs the command in its own process group, passing its output through live while keeping
// a tail for the run log, forwarding signals, and enforcing the timeout on the whole tree.
export function supervise(options: SuperviseOptions): Supervision {
  const started = monotonicMs();
  const quiet = options.held;
  const capture = options.captureBytes > 0 || quiet !== null;
  const masker = options.masker ?? null;
  // --fail-on-stderr must see stderr, even with nothing captured: both pipes go through the
  // relay then, so stdout and stderr keep the order they have when captured.
  const stderrRule = options.stderrRule;
  const piped = capture || masker !== null || stderrRule !== null;
  const stdio: StdioOptions = ['inherit', piped ? 'pipe' : 'inherit', piped ? 'pipe' : 'inherit'];
  if (options.inheritFd !== null) stdio.push(options.inheritFd);
  const watchdog = options.dieWithWrapper ? Watchdog.start(options.heartbeat) : null;
  // Handlers go in before the child exists: a signal that arrives while the command starts
  // must reach it, not kill cronguard and orphan it. Until the spawn returns, the group
  // is unknown and the signal is delivered right after.
  let group: ProcessGroup | null = null;
  let forwardedSignal: NodeJS.Signals | null = null;
  let exited = false;
  const forward = (signal: NodeJS.Signals) => {
    group?.signal(signal);
    // Once the command has exited, what is left is its output on the way to a reader that
    // may never take it: the signal ends that wait (what it left running gets it too).
    if (exited) relay.interrupt(signal);
    else forwardedSignal = signal;
  };
  for (const signal of FORWARDED) process.on(signal, forward);
  // detached: the command leads a new process group, so signals and the timeout reach
  // everything it starts, and a terminal's ^C reaches it only through cronguard.
  // CRONGUARD_PID marks the command and what it starts as cronguard's: its watchdog finds
  // them by it when cronguard died, or stopped, before it could name their group.
  const env = { ...process.env, ...options.fileEnv, ...options.env, CRONGUARD_PID: String(process.pid) };
  const child = spawn(options.file, options.argv.slice(1), { argv0: options.argv[0], stdio, detached: true, env });
  if (child.pid !== undefined) watchdog?.watch(child.pid);
  const processGroup = new ProcessGroup(child.pid ?? null, options.killSignal, options.killAfterMs);
  group = processGroup;
  if (forwardedSignal) processGroup.signal(forwardedSignal);
  const tail = new TailBuffer(options.captureBytes);
  const relay = new Relay(tail, quiet, capture ? options.live : null, (line) => options.say.warn(`${options.name}: ${line}`), masker);
  if (!capture) options.live?.markUncaptured();
  relay.pipe(1, child.stdout, process.stdout);
  relay.pipe(2, child.stderr, process.stderr);
  // A second reader of the same stream: it sees each chunk as the relay does, paused with it
  // for a slow reader, and holds no more than the start of one line.
  if (stderrRule) child.stderr?.on('data', (chunk: Buffer) => stderrRule.push(chunk));

  let terminatedBecause: string | null = null;
  let stoppedBy: string | null = null;
  const timer = options.timeoutMs === null ? null : setLongTimeout(() => processGroup.stop(), options.timeoutMs);

  const result = new Promise<ChildResult>((resolve) => {
    let settled = false;
    const settle = async (exitCode: number | null, signal: NodeJS.Signals | null, spawnError: NodeJS.ErrnoException | null) => {
      if (settled) return;
      settled = true;
      exited = true;
      timer?.clear();
      // A stopped group is waited out first: once its members are gone, so are their pipes.
      await processGroup.waitUntilGone();
      const outputNote = await relay.drain(processGroup);
      watchdog?.release();
      const ended: ChildResult = {
        pid: child.pid ?? null,
        exitCode,
        signal,
        timedOut: processGroup.stopping && terminatedBecause === null && stoppedBy === null,
        escalated: processGroup.escalated,
        forwardedSignal,
        terminatedBecause,
        stoppedBy,
        spawnError,
        durationMs: Math.round(monotonicMs() - started),
        output: tail.text(),
        outputTruncated: tail.truncated,
        outputNote: null,
        replayNote: null,
        stderrLine: stderrRule?.end() ?? null,
      };
      const replay = quiet !== null && options.showHeld(ended);
      const replayNote = replay ? await quiet.replay((id, chunk) => relay.write(id, chunk), options.say.warn) : null;
      const replayCut = replay ? await relay.delivered() : null;
      relay.release();
      for (const s of FORWARDED) process.off(s, forward);
      resolve({ ...ended, outputNote: [...relay.failures, outputNote ?? replayCut].filter(Boolean).join('; ') || null, replayNote });
    };
    // Without a pid the spawn itself failed, and no 'exit' may follow.
    child.once('error', (error) => {
      if (child.pid === undefined) void settle(null, null, error);
    });
    child.once('exit', (exitCode, signal) => void settle(exitCode, signal, null));
  });

  return {
    pid: child.pid ?? null,
    terminate(reason, graceMs) {
      terminatedBecause ??= reason;
      processGroup.stop(graceMs);
    },
    stop(request) {
      if (exited) return;
      stoppedBy ??= request.by;
      processGroup.stop(undefined, request.signal);
    },
    result,
  };
}
