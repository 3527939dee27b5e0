// cronguard's small I/O helpers: its own messages, flushing, timers, directories.
import { lstatSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { redact } from './redact.js';

// cronguard's own voice: one line per message on stderr, never stdout, which belongs to
// the command (and to cron's mail).
export interface Messages {
  warn(line: string): void;
  verbose(line: string): void;
}

export function messages(verbose: boolean, prefix = 'cronguard'): Messages {
  const write = (line: string) => process.stderr.write(redact(ownLine(`${prefix}: ${line}\n`)));
  return {
    warn: write,
    verbose: verbose ? write : () => {},
  };
}

// Streams whose queued output cronguard gave up on, told to by a signal while a reader was
// not taking it: waiting for them could take forever. (A stdio stream cannot be destroyed:
// Node undoes it.)
const abandoned = new WeakSet<NodeJS.WriteStream>();
export function abandon(stream: NodeJS.WriteStream): void {
  abandoned.add(stream);
}

// Whether everything written to the stream has been handed to the OS (or given up on).
export function handedOn(stream: NodeJS.WriteStream): boolean {
  return stream.writableLength === 0 || stream.destroyed || abandoned.has(stream);
}

// Whether the command's output left cronguard's stderr in the middle of a line (kept up to
// date by the relay as output passes, and set once more when the command is done, when a
// log file can tell): cronguard's next line of its own then starts a new line first, rather
// than glue onto the command's unfinished one.
let stderrMidLine = false;
export function setStderrMidLine(midLine: boolean): void {
  stderrMidLine = midLine;
}

// `text`, one or more whole lines of cronguard's own for stderr, on a line of its own.
export function ownLine(text: string): string {
  const line = stderrMidLine ? `\n${text}` : text;
  stderrMidLine = false;
  return line;
}

// Resolves once everything written to the stream has been handed to the OS. process.exit()
// would otherwise drop what is still queued for a pipe, such as a -q replay of a failed job.
export function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (handedOn(stream)) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('drain', resolve);
    stream.once('error', resolve);
    stream.once('close', resolve);
  });
}

// A promise timer. Deliberately not node:timers/promises, whose load is a measurable part of
// cronguard's start-up.
// With `abort`, it ends early when that is aborted; either way it takes its listener off
// again, or a wait that polls (for a lock, between retries) would pile them up on the one
// signal an invocation has.
export function sleep(ms: number, abort?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (abort?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      abort?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    abort?.addEventListener('abort', done);
  });
}

// setTimeout fires after 1 ms (with a warning) past about 24.8 days; longer delays are
// chained, so a `--kill-after 30d` really waits 30 days.
const MAX_TIMER_MS = 2 ** 31 - 1;
export function setLongTimeout(fn: () => void, ms: number): { clear(): void } {
  let handle: NodeJS.Timeout;
  const arm = (left: number): void => {
    handle = setTimeout(() => (left > MAX_TIMER_MS ? arm(left - MAX_TIMER_MS) : fn()), Math.min(left, MAX_TIMER_MS));
  };
  arm(ms);
  return { clear: () => clearTimeout(handle) };
}

// mkdir -p with an explicit mode. Not mkdirSync({ recursive: true }): Node's version loops
// forever on some paths that cannot exist (seen with /proc/x on Node 20).
export function mkdirp(dir: string, mode: number): void {
  // Asked first: a mkdir of what exists throws, and an error's stack costs every run more
  // than the lstat.
  if (lstatSync(dir, { throwIfNoEntry: false })) return;
  try {
    mkdirSync(dir, { mode });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    const parent = dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw error;
    mkdirp(parent, mode);
    mkdirSync(dir, { mode });
  }
}
