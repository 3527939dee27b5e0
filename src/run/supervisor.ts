import { type StdioOptions, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { setLongTimeout, sleep } from '../util/io.js';
import { ProcessGroup } from './group.js';
import { QuietBuffer, type StreamId, TailBuffer } from './output.js';

export interface SuperviseOptions {
  readonly file: string;
  readonly argv: readonly string[];
  readonly inheritFd: number | null;
  readonly timeoutMs: number | null;
  readonly killSignal: NodeJS.Signals;
  readonly killAfterMs: number;
  readonly quiet: boolean;
  readonly captureBytes: number;
  // Kill the command if cronguard dies (Linux parent-death signal, via util-linux setpriv),
  // for locks that die with the wrapper.
  readonly pdeathsig: boolean;
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
  // Handlers go in before the child exists: a signal that arrives while the command starts
  // must reach it, not kill cronguard and orphan it. Until the spawn returns, the group
  // is unknown and the signal is delivered right after.
  let group: ProcessGroup | null = null;
  let forwardedSignal: NodeJS.Signals | null = null;
  const forward = (signal: NodeJS.Signals) => {
    forwardedSignal = signal;
    group?.signal(signal);
  };
  for (const signal of FORWARDED) process.on(signal, forward);
  const stdout = process.stdout;
  const stderr = process.stderr;
  // detached: the command leads a new process group, so signals and the timeout reach
  // everything it starts, and a terminal's ^C reaches it only through cronguard.
  const [file, args, argv0] = withParentDeathSignal(options);
  const child = spawn(file, args, { argv0, stdio, detached: true });
  const processGroup = new ProcessGroup(child.pid ?? null, options.killSignal, options.killAfterMs);
  group = processGroup;
  if (forwardedSignal) processGroup.signal(forwardedSignal);
  const tail = new TailBuffer(options.captureBytes);
  const quiet = options.quiet ? new QuietBuffer() : null;
  const route = (id: StreamId, source: Readable | null, out: NodeJS.WriteStream) => {
    // A reader that went away (EPIPE) must not stall the command: keep capturing, stop
    // writing. A slow reader slows the command down rather than growing our memory.
    let broken = false;
    out.on('error', () => {
      broken = true;
      source?.resume();
    });
    source?.on('data', (chunk: Buffer) => {
      tail.push(chunk);
      if (quiet) quiet.push(id, chunk);
      else if (!broken && !out.write(chunk)) {
        source.pause();
        out.once('drain', () => source.resume());
      }
    });
  };
  route(1, child.stdout, stdout);
  route(2, child.stderr, stderr);

  let terminatedBecause: string | null = null;
  const timer =
    options.timeoutMs === null ? null : setLongTimeout(() => processGroup.stop(), options.timeoutMs);

  const result = new Promise<ChildResult>((resolve) => {
    let settled = false;
    const settle = async (
      exitCode: number | null,
      signal: NodeJS.Signals | null,
      spawnError: NodeJS.ErrnoException | null,
    ) => {
      if (settled) return;
      settled = true;
      timer?.clear();
      await Promise.race([new Promise((r) => child.once('close', r)), sleep(DRAIN_MS)]);
      child.stdout?.destroy();
      child.stderr?.destroy();
      await processGroup.waitUntilGone();
      for (const s of FORWARDED) process.off(s, forward);
      const durationMs = Math.round(performance.now() - started);
      if (quiet && (exitCode !== 0 || processGroup.stopping)) {
        quiet.replay((id, chunk) => (id === 1 ? stdout : stderr).write(chunk));
      }
      quiet?.dispose();
      resolve({
        pid: child.pid ?? null,
        exitCode,
        signal,
        timedOut: processGroup.stopping && terminatedBecause === null,
        escalated: processGroup.escalated,
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
      processGroup.stop();
    },
    result,
  };
}

// setpriv sets PR_SET_PDEATHSIG and then execs the command, which keeps its pid. SIGKILL, not
// TERM: a command that ignored TERM would go on running next to the instance that replaces it.
function withParentDeathSignal(options: SuperviseOptions): [string, string[], string | undefined] {
  const args = options.argv.slice(1);
  const setpriv = options.pdeathsig ? ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p)) : undefined;
  if (!setpriv) return [options.file, args, options.argv[0]];
  return [setpriv, ['--pdeathsig', 'KILL', '--', options.file, ...args], undefined];
}
