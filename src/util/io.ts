// cronguard's small I/O helpers: its own messages, flushing, timers, directories.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

// cronguard's own voice: one line per message on stderr, never stdout, which belongs to
// the command (and to cron's mail).
export interface Messages {
  warn(line: string): void;
  verbose(line: string): void;
}

export function messages(verbose: boolean, prefix = 'cronguard'): Messages {
  const write = (line: string) => process.stderr.write(`${prefix}: ${line}\n`);
  return {
    warn: write,
    verbose: verbose ? write : () => {},
  };
}

// Resolves once everything written to the stream has been handed to the OS. process.exit()
// would otherwise drop what is still queued for a pipe, such as a -q replay of a failed job.
export function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.writableLength === 0 || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('drain', resolve);
    stream.once('error', resolve);
    stream.once('close', resolve);
  });
}

// A promise timer. Deliberately not node:timers/promises, whose load is a measurable part of
// cronguard's start-up.
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// mkdir -p with an explicit mode. Not mkdirSync({ recursive: true }): Node's version loops
// forever on some paths that cannot exist (seen with /proc/x on Node 20).
export function mkdirp(dir: string, mode: number): void {
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
