import { sleep } from '../../util/io.js';
import { monotonicMs } from '../../util/time.js';
import type { RunRecorder } from '../recorder.js';

// How often a waiting loop asks whether a request is due: often where asking is a local
// read (SQLite), seldom where the server says so the moment a request is made (PostgreSQL
// NOTIFY, or a lease's loop, which keeps no session to LISTEN on and asks once a second: a
// request waits half a second, at the median) and asking only catches requests made for
// later (--at) coming due; and how often
// it tries to reach a run log whose connection was lost.
const POLL_MS = 50;
const POLL_NOTIFIED_MS = 1000;
const RECONNECT_MS = 1000;

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
    await watch.listen();
    return watch;
  }

  // Resolves at `when` (a monotonicMs() value), as soon as a request is due, or when `stop` is
  // aborted, whichever comes first.
  async until(when: number, stop: AbortSignal): Promise<void> {
    const woken = new AbortController();
    this.wake = () => woken.abort();
    const either = AbortSignal.any([stop, woken.signal]);
    try {
      while (!either.aborted && monotonicMs() < when) {
        if (!this.recorder.writable) await this.reconnect(when, either);
        if (await this.recorder.hasDueRequest(this.job)) return;
        const poll = !this.recorder.writable ? RECONNECT_MS : this.notified ? POLL_NOTIFIED_MS : POLL_MS;
        await sleep(Math.min(poll, when - monotonicMs()), either);
      }
    } finally {
      this.wake = null;
    }
  }

  // The loop holds the lock, so no one else serves the job: a run log whose connection was
  // lost is reached again, and listened to again, as soon as it answers; trying gives up at
  // `when`, so the next run of the loop is not held up by a server that does not answer.
  private async reconnect(when: number, stop: AbortSignal): Promise<void> {
    // AbortSignal.timeout takes whole milliseconds only.
    const until = AbortSignal.any([stop, AbortSignal.timeout(Math.max(0, Math.ceil(when - monotonicMs())))]);
    if (await this.recorder.reconnect(until)) await this.listen();
  }

  private async listen(): Promise<void> {
    this.notified = await this.recorder.onRequest(this.job, () => this.wake?.());
  }
}
