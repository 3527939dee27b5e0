import { sleep } from '../util/io.js';
import type { RunRecorder } from './recorder.js';

// How often a waiting loop asks whether a request is due: often where asking is a local
// read (SQLite), seldom where the server says so the moment a request is made (PostgreSQL
// NOTIFY) and asking only catches requests made for later (--at) coming due.
const POLL_MS = 50;
const POLL_NOTIFIED_MS = 1000;

// Waits, in a loop that holds the lock (--every, --on-request --for), until the next run is
// due, a request is, or cronguard gets a signal.
export class RequestWatch {
  private wake: (() => void) | null = null;
  private notified = false;

  private constructor(
    private readonly recorder: RunRecorder,
    private readonly job: string,
  ) {}

  static async open(recorder: RunRecorder, job: string): Promise<RequestWatch> {
    const watch = new RequestWatch(recorder, job);
    watch.notified = await recorder.onRequest(job, () => watch.wake?.());
    return watch;
  }

  // Resolves at `when` (a Date.now() value), as soon as a request is due, or when `stop` is
  // aborted, whichever comes first.
  async until(when: number, stop: AbortSignal): Promise<void> {
    const poll = this.notified ? POLL_NOTIFIED_MS : POLL_MS;
    const woken = new AbortController();
    this.wake = () => woken.abort();
    const either = AbortSignal.any([stop, woken.signal]);
    try {
      while (!either.aborted && Date.now() < when) {
        if (await this.recorder.hasDueRequest(this.job)) return;
        await sleep(Math.min(poll, when - Date.now()), either);
      }
    } finally {
      this.wake = null;
    }
  }
}
