import type { StopRequest } from '../store/types.js';
import type { RunRecorder } from './recorder.js';
import type { Supervision } from './supervisor.js';

// The signal `cronguard stop` on this host sends the wrapper to say "read your stop request
// now". Only a doorbell: the request itself, with the signal and who asked, is in the run's
// row, so an outside SIGUSR2 with no request behind it changes nothing, and an outside
// SIGTERM is never mistaken for a stop.
export const DOORBELL: NodeJS.Signals = 'SIGUSR2';

// How often a run with a shared log asks whether another host asked it to stop: one
// primary-key probe of a table that has rows only for runs someone stopped.
export const STOP_POLL_MS = 2000;

// How a running wrapper learns that it is asked to stop (cronguard stop, --replace): the
// doorbell from this host, and with a shared log a poll while the command runs. A look that
// fails changes nothing (the next one asks again): never the run's outcome.
export class StopWatch {
  // The request acted on, applied again to a command that starts after it came.
  private asked: StopRequest | null = null;
  private child: Supervision | null = null;
  private timer: NodeJS.Timeout | null = null;
  private looking = false;
  // Looks that asked the log, for -v's count of round trips.
  looks = 0;
  private closed = false;
  private readonly ring = () => void this.look();

  constructor(
    private readonly recorder: RunRecorder,
    private readonly poll: boolean,
    // Told once per new request (the invocation starts nothing more).
    private readonly onStop: (request: StopRequest) => void,
  ) {
    process.on(DOORBELL, this.ring);
  }

  // The stop request acted on, if any.
  get request(): StopRequest | null {
    return this.asked;
  }

  // The command started: a request already acted on stops it at once; a shared log is
  // asked every STOP_POLL_MS until end().
  begin(child: Supervision): void {
    this.child = child;
    if (this.asked) child.stop(this.asked);
    if (this.poll && this.timer === null) {
      this.timer = setInterval(this.ring, STOP_POLL_MS);
      this.timer.unref();
    }
  }

  end(): void {
    this.child = null;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  // The handler stays: a doorbell rung just as the run ended (its stopper read the row while
  // it was running) must not kill the wrapper, whose exit code is the command's.
  close(): void {
    this.end();
    this.closed = true;
  }

  private async look(): Promise<void> {
    const id = this.recorder.runId;
    const store = this.recorder.openStore;
    if (this.closed || this.looking || id === null || store === null) return;
    this.looking = true;
    this.looks++;
    try {
      const request = await store.stopRequest(id);
      if (request && (this.asked === null || request.signal !== this.asked.signal)) {
        this.asked = request;
        this.onStop(request);
        this.child?.stop(request);
      }
    } catch {
      // The log did not answer: the run goes on as it would have, and the next look asks again.
    } finally {
      this.looking = false;
    }
  }
}
