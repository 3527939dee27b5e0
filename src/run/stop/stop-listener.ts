import type { StopRequest } from '../../store/types.js';
import type { RunRecorder } from '../recorder.js';
import type { Supervision } from '../supervisor/supervisor.js';

// The signal `cronguard stop` on this host sends the wrapper to say "read your stop request
// now". Only a doorbell: the request itself, with the signal and who asked, is in the run's
// row, so a doorbell with no request behind it changes nothing, and an outside SIGTERM is
// never mistaken for a stop. SIGURG, whose default action is to be ignored: a doorbell that
// comes before the wrapper listens, or after Node has let go of its handlers at exit (the
// event loop ended), or to a pid that is no longer a wrapper's, does nothing. SIGUSR2 (the
// doorbell of earlier versions) killed a wrapper rung as it exited, after its run was
// recorded: cron saw 140, not the command's code.
export const DOORBELL: NodeJS.Signals = 'SIGURG';
// Answered as the doorbell too, for a `cronguard stop` of an earlier version.
const OLD_DOORBELL: NodeJS.Signals = 'SIGUSR2';

// The StopListener of this invocation, once there is one; null before.
let answering: (() => void) | null = null;

// Answers the doorbells from the start of the run path to the process's end: a ring before
// the run's StopListener exists, or after it closed, is heard and does nothing.
export function answerDoorbell(): void {
  for (const signal of [DOORBELL, OLD_DOORBELL]) process.on(signal, () => answering?.());
}

// How often a run with a shared log asks whether another host asked it to stop: one
// primary-key probe of a table that has rows only for runs someone stopped.
export const STOP_POLL_MS = 2000;

// How a running wrapper learns that it is asked to stop (cronguard stop, --replace): the
// doorbell from this host, and with a shared log a poll while the command runs. A look that
// fails changes nothing (the next one asks again): never the run's outcome.
export class StopListener {
  // The request acted on, applied again to a command that starts after it came.
  private asked: StopRequest | null = null;
  private child: Supervision | null = null;
  private timer: NodeJS.Timeout | null = null;
  private looking = false;
  // Looks that asked the log, for -v's count of round trips.
  looks = 0;
  private closed = false;
  // The run ids of the last two commands begun: `stop` between a retry's attempts or a
  // loop's runs asks the run that ended last, which may be one behind by the time the
  // doorbell is heard (the next attempt just recorded). Asked on the doorbell only.
  private begun: number[] = [];
  private readonly ring = () => void this.look(true);
  private readonly poll = () => void this.look(false);

  constructor(
    private readonly recorder: RunRecorder,
    private readonly polls: boolean,
    // Told once per new request (the invocation starts nothing more).
    private readonly onStop: (request: StopRequest) => void,
  ) {
    answering = this.ring;
  }

  // The stop request acted on, if any.
  get request(): StopRequest | null {
    return this.asked;
  }

  // The command started: a request already acted on stops it at once; a shared log is
  // asked every STOP_POLL_MS until end().
  begin(child: Supervision): void {
    this.child = child;
    const id = this.recorder.runId;
    if (id !== null && this.begun.at(-1) !== id) this.begun = [...this.begun.slice(-1), id];
    if (this.asked) child.stop(this.asked);
    if (this.polls && this.timer === null) {
      this.timer = setInterval(this.poll, STOP_POLL_MS);
      this.timer.unref();
    }
  }

  end(): void {
    this.child = null;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  // The doorbell is still answered (answerDoorbell): one rung just as the run ended (its
  // stopper read the row while it was running) must not kill the wrapper, whose exit code is
  // the command's.
  close(): void {
    this.end();
    this.closed = true;
  }

  private async look(doorbell: boolean): Promise<void> {
    const id = this.recorder.runId;
    const store = this.recorder.openStore;
    if (this.closed || this.looking || id === null || store === null) return;
    this.looking = true;
    try {
      const ids = doorbell ? [...new Set([id, ...this.begun])] : [id];
      let request: StopRequest | null = null;
      for (const asked of ids) {
        this.looks++;
        request = await store.stopRequest(asked);
        if (request) break;
      }
      if (request && (this.asked === null || request.signal !== this.asked.signal)) {
        this.asked = request;
        this.onStop(request);
        this.child?.stop(request);
      }
    } catch {
      // The log did not answer: the run goes on as it would have, and the next look asks again,
      // over a fresh session if this one was lost.
      await this.recorder.renewLostSession();
    } finally {
      this.looking = false;
    }
  }
}
