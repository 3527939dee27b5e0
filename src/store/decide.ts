import type { AdmitOptions, Verdict } from './admission.js';
import { dueAfterMs, type Paused } from './jobs.js';
import type { ClaimedRequest } from './requests.js';

// The admission rule, decided on what a store read for one invocation under its lock: the
// embedded log and MySQL read and write, this decides. PostgreSQL's admit() applies the same
// rule in the same order (functions/admit.sql); test/store/admission-table.test.ts holds the
// three stores to one table of cases. The fleet's one run per tick comes after it, in the
// stores that apply it: claiming the tick is a write of its own.

// What the store found, read under the invocation's lock.
export interface Findings {
  // The job's own pause, else the fleet's, if one holds now.
  readonly paused: Paused | null;
  // The job's requests due now, oldest first.
  readonly due: readonly ClaimedRequest[];
  // When the job's latest run (not an abandoned one) started, as the log holds it; read when
  // readsLastStart(options), else null.
  readonly lastStart: string | null;
  // --scheduled: the stored schedule, and when a run last said there is none it can read.
  readonly schedule: string | null;
  readonly saidAt: string | null;
}

// A refusal that says `warn` is the day's one that says the job has no schedule: the store
// notes that it said so.
export function decide(found: Findings, startedAtMs: number, options: AdmitOptions): Verdict {
  if (found.paused) return { admitted: false, reason: 'disabled', paused: found.paused };
  const requests = served(found.due, options);
  // Requests run the job whatever --on-request, the interval or the schedule would say.
  if (requests.length > 0) return { admitted: true, requests };
  if (options.onRequest && options.minIntervalMs === null) return { admitted: false, reason: 'idle' };
  const lastMs = found.lastStart === null ? null : Date.parse(found.lastStart);
  if (options.scheduled !== null && !options.manual) {
    const verdict = options.scheduled.verdict(found.schedule, found.saidAt, lastMs, startedAtMs);
    return verdict.due ? { admitted: true, requests } : verdict.refusal;
  }
  const spacing = Math.max(options.minIntervalMs ?? 0, options.spacingMs ?? 0);
  if (spacing > 0 && !options.manual && lastMs !== null && lastMs > startedAtMs - dueAfterMs(spacing)) {
    return { admitted: false, reason: 'interval', lastStartedAt: found.lastStart as string };
  }
  return { admitted: true, requests };
}

// Whether decide() needs the job's last start: for the interval, a loop's spacing or a
// schedule, none of which applies to a run by hand.
export function readsLastStart(options: AdmitOptions): boolean {
  return (options.minIntervalMs !== null || options.spacingMs !== null || options.scheduled !== null) && !options.manual;
}

// All due requests in a --batch run (up to batchMax); otherwise every one without
// arguments and the oldest one with.
function served(due: readonly ClaimedRequest[], options: AdmitOptions): readonly ClaimedRequest[] {
  if (options.batch) return due.slice(0, options.batchMax ?? due.length);
  const firstWithArgs = due.find((r) => r.args.length > 0);
  return due.filter((r) => r.args.length === 0 || r === firstWithArgs);
}
