import { spawn, type StdioOptions } from 'node:child_process';
import { sleep } from '../util/sleep.js';
import { ProcessGroup } from './group.js';
import { QuietBuffer, type StreamId } from './quiet.js';
import { TailBuffer } from './tail.js';

export interface SuperviseOptions {
  readonly file: string;
  readonly argv: readonly string[];
  readonly inheritFd: number | null;
  readonly timeoutMs: number | null;
  readonly killSignal: NodeJS.Signals;
  readonly killAfterMs: number;
  readonly quiet: boolean;
  readonly captureBytes: number;
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
  readonly spawnError: NodeJS.ErrnoException | null;
  readonly durationMs: number;
  readonly output: string | null;
  readonly outputTruncated: boolean;
}

export interface Supervision {
  readonly pid: number | null;
  // Stops the command's whole process group (signal, then SIGKILL), e.g. on lock loss.
  terminate(reason: string): void;
  readonly result: Promise<ChildResult>;
}

const FORWARDED: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'];
// After the command exits, output still in flight gets this long to arrive; a background
// process that keeps the pipe open must not keep cronguard waiting.
const DRAIN_MS = 200;

// Runs the command in its own process group, passing its output through live while keeping
// a tail for the run log, forwarding signals, and enforcing the timeout on the whole tree.
export function supervise(options: SuperviseOptions): Supervision {
  const started = performance.now();
  const capture = options.captureBytes > 0 || options.quiet;
  const stdio: StdioOptions = ['inherit', capture ? 'pipe' : 'inherit', capture ? 'pipe' : 'inherit'];
  if (options.inheritFd !== null) stdio.push(options.inheritFd);
  // detached: the command leads a new process group, so signals and the timeout reach
  // everything it starts, and a terminal's ^C reaches it only through cronguard.
  const child = spawn(options.file, options.argv.slice(1), {
    argv0: options.argv[0] as string,
    stdio,
    detached: true,
  });
  const group = new ProcessGroup(child.pid ?? null, options.killSignal, options.killAfterMs);
  const tail = new TailBuffer(options.captureBytes);
  const quiet = options.quiet ? new QuietBuffer() : null;
  const route = (id: StreamId, out: NodeJS.WriteStream) => (chunk: Buffer) => {
    tail.push(chunk);
    if (quiet) quiet.push(id, chunk);
    else out.write(chunk);
  };
  child.stdout?.on('data', route(1, process.stdout));
  child.stderr?.on('data', route(2, process.stderr));

  let forwardedSignal: NodeJS.Signals | null = null;
  const forward = (signal: NodeJS.Signals) => {
    forwardedSignal = signal;
    group.signal(signal);
  };
  for (const signal of FORWARDED) process.on(signal, forward);
  let terminatedBecause: string | null = null;
  const timer =
    options.timeoutMs === null ? null : setLongTimeout(() => group.stop(), options.timeoutMs);

  const result = new Promise<ChildResult>((resolve) => {
    let settled = false;
    const settle = async (
      exitCode: number | null,
      signal: NodeJS.Signals | null,
      spawnError: NodeJS.ErrnoException | null,
    ) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer.handle);
      await Promise.race([new Promise((r) => child.once('close', r)), sleep(DRAIN_MS)]);
      child.stdout?.destroy();
      child.stderr?.destroy();
      await group.waitUntilGone();
      for (const s of FORWARDED) process.off(s, forward);
      const durationMs = Math.round(performance.now() - started);
      if (quiet && (exitCode !== 0 || group.stopping)) {
        quiet.replay((id, chunk) => (id === 1 ? process.stdout : process.stderr).write(chunk));
      }
      quiet?.dispose();
      resolve({
        pid: child.pid ?? null,
        exitCode,
        signal,
        timedOut: group.stopping && terminatedBecause === null,
        escalated: group.escalated,
        forwardedSignal,
        terminatedBecause,
        spawnError,
        durationMs,
        output: tail.text(),
        outputTruncated: tail.truncated,
      });
    };
    // Without a pid the spawn itself failed, and no 'exit' may follow.
    child.once('error', (error) => {
      if (child.pid === undefined) void settle(null, null, error);
    });
    child.once('exit', (exitCode, signal) => void settle(exitCode, signal, null));
  });

  return {
    pid: child.pid ?? null,
    terminate(reason) {
      terminatedBecause ??= reason;
      group.stop();
    },
    result,
  };
}

// setTimeout caps at about 24.8 days; longer timeouts are chained.
function setLongTimeout(fn: () => void, ms: number): { handle: NodeJS.Timeout } {
  const MAX = 2 ** 31 - 1;
  const box = { handle: setTimeout(() => (ms > MAX ? (box.handle = setLongTimeout(fn, ms - MAX).handle) : fn()), Math.min(ms, MAX)) };
  return box;
}
