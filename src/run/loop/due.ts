import type { RunConfig } from '../../cli/config.js';
import { heldBySession } from '../../lock/lock-spec.js';
import type { AdmitOptions, Refused } from '../../store/admission.js';
import { dueAfterMs, lastCountedStart, pauseOf } from '../../store/jobs.js';
import type { NewRun, UnsettledRun } from '../../store/types.js';
import { isSameProcess } from '../../util/process-id.js';
import { monotonicMs } from '../../util/time.js';
import { AroundGate, type Entry, type Gate } from '../gate/gate.js';
import type { RunRecorder } from '../recorder.js';

// A lock other jobs share is taken only by a job that is due (see notDue; --replace asks too,
// before it stops the running copy).
export class DueFirstGate extends AroundGate {
  constructor(
    inner: Gate,
    private readonly config: RunConfig,
    private readonly options: AdmitOptions,
    private readonly run: NewRun,
  ) {
    super(inner);
  }

  async admit(abort: AbortSignal): Promise<Entry> {
    return (await notDue(this.recorder, this.config, this.options, this.run, false)) ?? (await this.inner.admit(abort));
  }
}

// Whether an invocation is certainly not due, asked of the log before its lock is taken.
// Jobs that share a lock (--lock-file, --lock-key) must not take it only to learn that they
// have nothing to do: a due job of the same lock that starts then would skip its tick. The
// admission under the lock still decides (this is only ever a "no" it would also say), so
// the answer errs towards "due": a request, a log that cannot answer, an abandoned last run,
// a loop that waits for work holding the lock, a run the admission may find to settle, all
// take the lock and ask again. `replacing`: a run the admission may settle is only one
// certainly gone (see settledUnderLock).
export async function notDue(recorder: RunRecorder, config: RunConfig, options: AdmitOptions, run: NewRun, replacing: boolean): Promise<Refused | null> {
  const name = config.name;
  const answer = await recorder.consult('check whether the job is due', async (store) => {
    // In turn: the first creates a shared log's schema when it is not there yet.
    const [job] = await store.jobStatus(name);
    return { job, requested: await store.hasDueRequest(name), unsettled: await store.unsettledRuns(name) };
  });
  if (!answer) return null;
  const { job } = answer;
  // Paused on its own or by the fleet (disable --all); a job not in the log yet is the
  // admission's to refuse.
  const paused = job ? pauseOf(job) : null;
  if (paused) return { admitted: false, reason: 'disabled', paused };
  if (answer.requested || options.keepLock || answer.unsettled.some((r) => settledUnderLock(r, run, replacing))) return null;
  if (options.onRequest && options.minIntervalMs === null) return { admitted: false, reason: 'idle' };
  const last = job ? lastCountedStart(job) : null;
  // A job without a readable schedule is the admission's to say so (once a day).
  if (options.scheduled !== null && !options.manual && job?.schedule != null) {
    const verdict = options.scheduled.verdict(job.schedule, null, last === null ? null : Date.parse(last), Date.now());
    return verdict.due || verdict.refusal.reason !== 'schedule' ? null : verdict.refusal;
  }
  const spacing = Math.max(options.minIntervalMs ?? 0, options.spacingMs ?? 0);
  if (spacing === 0 || options.manual || !job) return null;
  // Due by the admission's own rule, cron's jitter allowed for (dueAfterMs).
  if (last === null || Date.parse(last) + dueAfterMs(spacing) <= Date.now()) return null;
  return { admitted: false, reason: 'interval', lastStartedAt: last };
}

// Whether the admission under this invocation's lock may settle this run (abandon it, end or
// give back its claims), as it does for a job of its own lock: a killed wrapper's requests
// must not stay `running` until someone makes another. A run under the same lock (the
// postgres or mysql lock anywhere, a local one on this host) costs the due jobs nothing to try: if
// its wrapper lives, it holds the shared lock; a run of this host whose wrapper is gone is
// settled too. Runs under another host's local lock are that host's to settle.
// With --replace, trying costs the copy that runs: only a run certainly gone counts, so a
// job that is not due stops nothing.
function settledUnderLock(r: UnsettledRun, run: NewRun, replacing: boolean): boolean {
  const here = r.host === run.host;
  const gone = here && !isSameProcess(r.pid, r.wrapper_start);
  if (replacing) return gone;
  const sameLock = r.lock_backend === run.lockBackend && r.lock_key === run.lockKey && (heldBySession(run.lockBackend) || here);
  return sameLock || gone;
}

// When a --scheduled loop (--for) looks at its schedule again: when it next fires, as the
// refusal says; soon after a run, for the refusal that says when next; and at least once a
// minute, so that a schedule changed meanwhile applies within a minute. Monotonic ms;
// never without --scheduled (the loop then wakes for --every and requests only).
const LOOK_AGAIN_MS = 60_000;
const AFTER_RUN_MS = 1_000;

export function scheduledLook(config: RunConfig, refusal: Refused | null): number {
  if (!config.scheduled) return Number.POSITIVE_INFINITY;
  if (refusal === null) return monotonicMs() + AFTER_RUN_MS;
  const untilFire = refusal.reason === 'schedule' && refusal.nextAt ? Math.max(0, Date.parse(refusal.nextAt) - Date.now()) : LOOK_AGAIN_MS;
  return monotonicMs() + Math.min(untilFire, LOOK_AGAIN_MS);
}
