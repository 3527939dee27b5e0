import type { Paused } from './jobs.js';
import type { ClaimedRequest } from './requests.js';
import type { NewRun, RunningRow } from './types.js';

// An invocation's admission: what it may do, and if it may not run, why (every store's
// admit() answers it; run/ acts on it).

// Who holds what kept an invocation from running: the lock's holder, or the run that
// already served this tick on another host. Fields are null when the log cannot tell.
export interface Holder {
  readonly runId: number | null;
  readonly host: string | null;
  readonly pid: number | null;
  readonly startedAt: string | null;
}

// A holder's run as a store reads it: id, host, pid and start, in the types its driver gives
// (a number or a bigint's string; a Date or a time's text). `time` reads a start a dialect
// writes its own way (MySQL's DATETIME, without a zone); others are ISO 8601 or Dates.
export interface HolderRow {
  readonly id: number | string;
  readonly host: string;
  readonly pid: number;
  readonly started_at: Date | string;
}

export function toHolder(row: HolderRow | null | undefined, time: (value: Date | string) => string = isoTime): Holder | null {
  return row ? { runId: Number(row.id), host: row.host, pid: row.pid, startedAt: time(row.started_at) } : null;
}

function isoTime(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

// Why an invocation did not run: the lock is held, the job is paused, nothing was
// requested (--on-request), the minimum interval has not passed, another host ran this
// tick, its stored schedule is not due (--scheduled), or it has no schedule it can read; or
// a running copy was given another --max-running (`holder`, and its `maxRunning`).
export type Refusal = 'locked' | 'disabled' | 'idle' | 'interval' | 'tick' | 'schedule' | 'unscheduled' | 'slots';

// Whether an admission keeps the lock it took: a run does; a refusal frees it, but a loop
// (--for) that finds nothing due yet keeps it to wait for work.
export function keepsLock(admission: Admission, options: AdmitOptions): boolean {
  return admission.admitted || (options.keepLock && WAITING.has(admission.reason));
}

const WAITING: ReadonlySet<Refusal> = new Set(['idle', 'interval', 'schedule', 'unscheduled']);

// The answer to "may this invocation run?": a run id and the requests it serves, or why not.
export type Admission =
  | {
      readonly admitted: true;
      readonly runId: number;
      readonly requests: readonly ClaimedRequest[];
      // When it got its lock, as the log recorded it on its server's clock; absent when the
      // log recorded the time the run was given (the embedded log, a schema not yet upgraded).
      readonly startedAt?: Date;
    }
  | {
      readonly admitted: false;
      readonly reason: Refusal;
      readonly holder?: Holder | null;
      readonly paused?: Paused;
      readonly lastStartedAt?: string;
      // 'schedule': the schedule, and when it next fires.
      readonly schedule?: string;
      readonly nextAt?: string;
      // 'unscheduled': why the stored one cannot be read (null: there is none), and whether
      // this invocation is the one of the day that says so (the store noted it).
      readonly problem?: string | null;
      readonly warn?: boolean;
      readonly maxRunning?: number;
    };

// Why an invocation did not run, with what the refusal says.
export type Refused = Extract<Admission, { admitted: false }>;

// An admission's decision before the run is recorded: the requests it serves, or why not.
export type Verdict = { readonly admitted: true; readonly requests: readonly ClaimedRequest[] } | Refused;

// --scheduled: whether the stored schedule is due, decided in the admission, under the lock.
export interface ScheduledRule {
  // The host's time zone, in which a schedule without TZ= is read.
  readonly zone: string;
  // Whether a fire counts as come a little early, for cron's jitter: an invocation's first
  // admission; not a loop's later ones (inLoop).
  readonly early: boolean;
  inLoop(): ScheduledRule;
  // `saidAt`: when a run last said the job has no schedule.
  verdict(spec: string | null, saidAt: string | null, lastStartMs: number | null, nowMs: number): ScheduleVerdict;
}

export type ScheduleVerdict = { readonly due: true } | { readonly due: false; readonly refusal: Extract<Admission, { admitted: false }> };

export interface AdmitOptions {
  // Apply the fleet rule: skip when another host already ran this job in the run's tick.
  readonly oneRunPerTick: boolean;
  // Whether the wrapper of one of this host's `running` rows of the job is gone, so the
  // row may be marked abandoned.
  // `held`: the run being admitted, whose lock (and slot) it holds.
  readonly isGone: (row: RunningRow, held: Pick<NewRun, 'lockBackend' | 'lockKey'>) => boolean;
  // Skip when the last run started less than this long ago (and nothing was requested).
  readonly minIntervalMs: number | null;
  // A loop's first admission (--every D): refused as `interval` (a loop keeps its lock and
  // waits) while the job's last run started less than D ago, so that a new invocation's first
  // run keeps the period after the last invocation's last one; D is not recorded as the job's
  // interval. Null for a single run and for a loop's later admissions (spaced by the loop).
  readonly spacingMs: number | null;
  // Run only for requests (or, with minIntervalMs, when the interval has passed).
  readonly onRequest: boolean;
  // Claim every due request, up to batchMax, for one run; otherwise every one without
  // arguments and the oldest one with.
  readonly batch: boolean;
  readonly batchMax: number | null;
  // Run from a terminal: the interval and the fleet rule do not apply.
  readonly manual: boolean;
  // A loop (--for) keeps the lock while nothing is due (idle, interval), to wait for work.
  readonly keepLock: boolean;
  // --scheduled: run when the stored schedule is due (or for requests); null without it.
  readonly scheduled: ScheduledRule | null;
}
