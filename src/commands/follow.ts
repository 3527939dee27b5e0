import { type FSWatcher, watch } from 'node:fs';
import { constants } from 'node:os';
import { CronguardError } from '../errors.js';
import type { LiveReader, LiveState } from '../run/supervisor/live-reader.js';
import type { RunStore } from '../store/run-store.js';
import type { RunRow } from '../store/types.js';
import { isSameProcess } from '../util/process-id.js';
import { ending } from './run-header.js';
import type { Stdout } from './stdout.js';

// How often the run log and the wrapper's process are asked whether the run still runs.
// The live copy's removal usually says so first; this catches a wrapper that was killed
// (its copy stays) or a copy that stopped.
const CHECK_MS = 1000;
// How often the copy is looked at where its directory cannot be watched (or not yet).
const POLL_MS = 250;
const SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

export type Note = (line: string) => void;

// `logs -f` of a run of this host: its output so far, then live until the run ends, then
// one line on stderr saying how it ended. Returns the exit code: 0 however the run ended
// (its outcome is in that line, and in `history`), 128+N when a signal ends the following,
// 0 when the reader of stdout went away.
export async function follow(run: RunRow, store: RunStore, reader: LiveReader, out: Stdout, stop: AbortController, note: Note): Promise<number> {
  const onSignal = (signal: NodeJS.Signals) => stop.abort(signal);
  for (const signal of SIGNALS) process.on(signal, onSignal);
  const waker = new Waker(reader.dir);
  let row = run;
  let refused = false;
  let stoppedNoted = false;
  let checked = 0;
  // Pumps what the copy has; a symlink or FIFO in its place is refused, once, and the
  // stored output shown when the run ends instead.
  const pump = async (): Promise<LiveState> => {
    if (refused) return 'waiting';
    try {
      return await reader.pump(out.write);
    } catch (error) {
      if (!(error instanceof CronguardError)) throw error;
      refused = true;
      note(`${error.message}; run ${run.id}'s stored output follows when it ends`);
      return 'waiting';
    }
  };
  try {
    for (;;) {
      const state = await pump();
      if (stop.signal.aborted) break;
      if (state === 'removed' || Date.now() - checked >= CHECK_MS) {
        checked = Date.now();
        const why = stoppedNoted ? null : reader.stoppedWhy();
        if (why !== null) {
          stoppedNoted = true;
          note(`the live copy of run ${run.id} stopped (${why || 'reason unknown'}); the log keeps the tail: cronguard logs ${run.id} once it ends`);
        }
        row = (await store.getRun(run.id)) ?? row;
        if (state === 'removed' || row.status !== 'running' || !isSameProcess(row.pid, row.wrapper_start)) break;
      }
      await waker.wait(waker.watching ? CHECK_MS : POLL_MS, stop.signal);
    }
    // The wrapper wrote all of it before recording the end: what is left is complete.
    if (!stop.signal.aborted) await pump();
  } finally {
    for (const signal of SIGNALS) process.off(signal, onSignal);
    waker.close();
    reader.close();
  }
  const reason = stop.signal.reason as string | undefined;
  if (stop.signal.aborted) return reason === 'EPIPE' ? 0 : 128 + ((constants.signals as Record<string, number>)[reason as string] ?? 0);
  // Nothing came live (no copy could be read): the tail the run log kept is what there is.
  if (reader.total === 0 && row.output) await out.write(row.output);
  if (reader.total === 0 && row.output_truncated) note(`run ${row.id}: output truncated; this is its last ${Buffer.byteLength(row.output ?? '')} bytes`);
  note(`run ${row.id} (${row.job}) ${endOf(row)}`);
  return 0;
}

function endOf(row: RunRow): string {
  if (row.status !== 'running') return `ended: ${ending(row)}`;
  if (!isSameProcess(row.pid, row.wrapper_start)) return `ended: its wrapper (pid ${row.pid}) is gone, so the run was abandoned`;
  return 'ended; its outcome is not in the run log yet';
}

// Wakes the follower when anything changes in the live directory (inotify, through
// fs.watch), and after a while regardless, to look at the run; only polls where the
// directory cannot be watched, e.g. before it exists.
class Waker {
  private watcher: FSWatcher | null = null;
  private pending = false;
  private wake: (() => void) | null = null;

  constructor(private readonly dir: string) {}

  get watching(): boolean {
    return this.watcher !== null;
  }

  wait(ms: number, abort: AbortSignal): Promise<void> {
    this.watch();
    if (this.pending || abort.aborted) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        abort.removeEventListener('abort', done);
        this.wake = null;
        this.pending = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      abort.addEventListener('abort', done);
      this.wake = done;
    });
  }

  close(): void {
    this.watcher?.close();
    this.watcher = null;
  }

  private watch(): void {
    if (this.watcher) return;
    try {
      this.watcher = watch(this.dir, { persistent: false }, () => {
        this.pending = true;
        this.wake?.();
      });
      this.watcher.on('error', () => this.close());
    } catch {
      // No directory yet (the run has printed nothing), or no inotify: polled instead.
    }
  }
}
