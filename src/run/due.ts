import type { RunConfig } from '../cli/config.js';
import { dueAfterMs } from '../store/jobs.js';
import type { AdmitOptions } from '../store/types.js';
import type { Refused, RunRecorder } from './recorder.js';

// Whether an invocation is certainly not due, asked of the log before its lock is taken.
// Jobs that share a lock (--lock-file, --lock-key) must not take it only to learn that they
// have nothing to do: a due job of the same lock that starts then would skip its tick. The
// admission under the lock still decides (this is only ever a "no" it would also say), so
// the answer errs towards "due": a request, a log that cannot answer, an abandoned last run,
// a loop that waits for work holding the lock, all take the lock and ask again.
export async function notDue(recorder: RunRecorder, config: RunConfig, options: AdmitOptions): Promise<Refused | null> {
  const name = config.name;
  const answer = await recorder.consult('check whether the job is due', async (store) => {
    // In turn: the first creates a shared log's schema when it is not there yet.
    const [job] = await store.jobStatus(name);
    return { job, requested: await store.hasDueRequest(name) };
  });
  if (!answer) return null;
  const { job } = answer;
  if (job?.state === 'disabled') {
    return { admitted: false, reason: 'disabled', paused: { reason: job.disabled_reason, since: job.disabled_since, by: job.disabled_by } };
  }
  if (answer.requested || options.keepLock) return null;
  if (options.onRequest && options.minIntervalMs === null) return { admitted: false, reason: 'idle' };
  if (options.minIntervalMs === null || options.manual || !job) return null;
  const last = job.running_since ?? (job.last_status === 'abandoned' ? null : job.last_started_at);
  // Due by the admission's own rule, cron's jitter allowed for (dueAfterMs).
  if (last === null || Date.parse(last) + dueAfterMs(options.minIntervalMs) <= Date.now()) return null;
  return { admitted: false, reason: 'interval', lastStartedAt: last };
}
