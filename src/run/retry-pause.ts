import { type Paused, pauseOf } from '../store/jobs.js';
import type { NewRun, RunOutcome } from '../store/types.js';
import type { Attempts } from './attempts.js';

// Whether a job paused (`disable NAME`, `disable --all`) before its next attempt (--retries)
// could start; if so, the attempts end here, recorded, and this is the pause.
//
// It is looked for before the next attempt's row is recorded, and again after: a pause
// committed between the first look and that row left a `disable --drain` begun after it no
// row `running` to see (the last attempt had ended, the next was not there yet), so it said
// drained, and the attempt would have started after it. A pause after the second look finds
// the row, and its drain waits for the attempt. Found by the second look, the attempt is
// recorded as not started, with the outcome of the one before it (the invocation's own).
export async function pausedBeforeRetry(ctx: Attempts, next: NewRun, last: RunOutcome): Promise<Paused | null> {
  const early = await pausedNow(ctx);
  if (early) {
    // The attempt was recorded as one more to come; it is the last after all.
    await ctx.recorder.finish(last, true);
    return early;
  }
  await ctx.recorder.retry(next);
  const late = await pausedNow(ctx);
  if (late) {
    const error = `not started: the job was paused as attempt ${next.attempt} was recorded; attempt ${next.attempt - 1}'s outcome stands`;
    await ctx.recorder.finish({ ...last, finishedAt: new Date(), durationMs: 0, output: null, outputTruncated: false, error }, true);
  }
  return late;
}

// The job's pause, its own or the fleet's, now (null: not paused, or the log out of reach).
async function pausedNow(ctx: Attempts): Promise<Paused | null> {
  const [status] = (await ctx.recorder.consult('look for a pause', (store) => store.jobStatus(ctx.config.name))) ?? [];
  return status ? pauseOf(status) : null;
}
