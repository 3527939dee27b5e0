import { printable } from '../util/printable.js';

// A job as `status`, `check`, `metrics` and the web page see it: what it is doing, how it
// last ended, how its recent runs went, what waits for it.

// Why and since when a job is paused (`cronguard disable`), until when (--until; null:
// until enable), and whether by the fleet's pause (`disable --all`) rather than its own.
export interface Paused {
  readonly reason: string | null;
  readonly since: string | null;
  readonly by: string | null;
  readonly until?: string | null;
  readonly fleet?: boolean;
}

// A pause as a line says it: since when, by whom, until when, why. Who and why are anyone's
// text (a web form, a script): escaped, so that the line a run writes to a terminal or
// cron's mail stays one line and cannot send the terminal escape sequences.
export function describePause(p: Paused | null): string {
  const by = p?.by ? ` by ${p.by}` : '';
  const until = p?.until ? ` until ${p.until}` : '';
  return printable(`paused${p?.fleet ? ' fleet-wide' : ''} since ${p?.since ?? '?'}${by}${until}${p?.reason ? `: ${p.reason}` : ''}`);
}

// What resumes a pause: `cronguard enable NAME`, or `enable --all` for the fleet's.
export function resumeHint(job: string, p: Paused | null): string {
  return `cronguard enable ${p?.fleet ? '--all' : job} resumes it${p?.until ? `, or it resumes by itself at ${p.until}` : ''}`;
}

// One pause or resume, as the log keeps it (`status NAME` shows a job's and the fleet's):
// who (user@host), when, why, until when; `job` null for the fleet's (fleet_wide).
export interface PauseEvent {
  readonly id: number;
  readonly job: string | null;
  readonly action: 'pause' | 'resume';
  readonly at: string;
  readonly by: string;
  readonly reason: string | null;
  readonly until: string | null;
  readonly fleet_wide: boolean;
}

// How many of them `status NAME` and the job's page show.
export const PAUSE_EVENTS_SHOWN = 20;

// How long after its last start a job with --min-interval (or a loop's first run, spaced by
// --every) is due: the interval less a slack of a tenth of it, at most 30 s. cron starts a
// `* * * * *` line a little before the minute as often as a little after, so without it
// 59.4 s after the last start would be "not yet" and an hourly job would run every 61
// minutes. Cron's ticks are a minute apart, so an interval under a minute is no tick's:
// its slack is a fraction of a second (an --every 30s loop's runs came 28 s apart with a
// tenth). The stored interval stays the one configured. As PostgreSQL's due_after_ms()
// (migration 0025).
export const SUBMINUTE_SLACK_MS = 250;
export function dueAfterMs(intervalMs: number): number {
  return intervalMs - Math.min(intervalMs / 10, intervalMs < 60_000 ? SUBMINUTE_SLACK_MS : 30_000);
}

// How many of its latest finished runs a job's statistics cover.
export const RECENT_RUNS = 50;

export interface RecentRun {
  id: number;
  status: string;
  duration_ms: number | null;
  // A later attempt of the same invocation (--retries) followed it: not its final outcome.
  retried: boolean;
}

// The recent runs that ended their invocations (the last attempt of each): what OK% counts,
// so a failure that a retry made good is not a failed run.
export function finalRuns(recent: readonly RecentRun[]): RecentRun[] {
  return recent.filter((r) => !r.retried);
}

export interface JobStatus {
  job: string;
  state: 'running' | 'idle' | 'disabled';
  // The running run, when there is one.
  running_since: string | null;
  running_host: string | null;
  running_pid: number | null;
  running_run_id: number | null;
  disabled_reason: string | null;
  disabled_since: string | null;
  disabled_by: string | null;
  // When the pause ends by itself (--until); null: at enable.
  disabled_until: string | null;
  // Paused by the fleet's pause (disable --all), not on its own.
  disabled_fleet_wide: boolean;
  last_run_id: number | null;
  last_status: string | null;
  last_exit_code: number | null;
  // The signal that ended the last run, when one did (exit_code is then null).
  last_signal: string | null;
  last_started_at: string | null;
  last_finished_at: string | null;
  last_success_at: string | null;
  pending_requests: number;
  // The job as its latest admitted run saw it.
  command: string | null;
  host: string | null;
  last_seen_at: string | null;
  min_interval_ms: number | null;
  // Its stored schedule (`cronguard schedule`), as cronguard spells it; null without one.
  schedule: string | null;
  // When the minimum interval lets it run again; null without one.
  next_due_at: string | null;
  last_duration_ms: number | null;
  // Invocations skipped while the last run held the lock (or had the tick).
  last_overlaps: number | null;
  last_success_run_id: number | null;
  last_success_duration_ms: number | null;
  // Over the latest RECENT_RUNS finished runs: the share of invocations that succeeded (by
  // their last attempts), and durations.
  success_rate: number | null;
  duration_median_ms: number | null;
  duration_p95_ms: number | null;
  // Those runs, oldest first.
  recent: RecentRun[];
  // The user whose process last held the job's local lock without sharing the job, and
  // when a run was skipped for it (see recordBlocked).
  blocked_by: string | null;
  blocked_at: string | null;
  // Finished runs ever recorded, by status (kept by a trigger; pruning does not lower it).
  runs_total: Record<string, number>;
  // Another job that runs now under the lock this job last took (jobs sharing a lock).
  lock_held_by: string | null;
  // A loop (--for) holding the job's lock between runs: who, and until when its window lasts
  // (see holdingOf); null when none does.
  holding: Holding | null;
  // Each target (a request's args) whose latest finished request failed, newest first, at
  // most FAILED_REQUESTS: a batch that fails one target each time, though its runs succeed
  // for the others (see isFailing).
  failed_requests: FailedRequest[];
}

export interface FailedRequest {
  readonly id: number;
  readonly args: string[];
  readonly error: string | null;
}

// How many failed targets a job's status names.
export const FAILED_REQUESTS = 20;

// A loop's hold of its job's lock between runs (RunStore.setHolding).
export interface Holding {
  readonly host: string;
  readonly pid: number;
  readonly until: string;
  readonly lock: string;
  readonly key: string | null;
}

// What a store reads; the statistics are worked out here, the same for both stores.
// `disabled`: paused on its own, judged (with `disabled_until`) by the store's clock.
export type JobStatusRow = Omit<JobStatus, 'state' | 'next_due_at' | 'success_rate' | 'duration_median_ms' | 'duration_p95_ms' | 'disabled_fleet_wide' | 'holding' | 'failed_requests'> & {
  disabled: boolean;
  // As the store gives it: a JSON array (text, or parsed), or null for none.
  failed_requests: unknown;
  holding_host: string | null;
  holding_pid: number | null;
  holding_until: string | null;
  holding_lock: string | null;
  holding_key: string | null;
};

// `fleet`: the fleet's pause, when one holds now: a job not paused on its own shows it.
export function jobStatusOf({ disabled: own, job, holding_host, holding_pid, holding_until, holding_lock, holding_key, failed_requests, ...fields }: JobStatusRow, fleet: Paused | null): JobStatus {
  const byFleet = !own && fleet !== null;
  const disabled = own || byFleet;
  const row = byFleet
    ? { ...fields, disabled_reason: fleet.reason, disabled_since: fleet.since, disabled_by: fleet.by, disabled_until: fleet.until ?? null }
    : own
      ? fields
      : { ...fields, disabled_reason: null, disabled_since: null, disabled_by: null, disabled_until: null };
  const recent = row.recent;
  const durations = recent.flatMap((r) => (r.duration_ms === null ? [] : [r.duration_ms])).sort((a, b) => a - b);
  const lastStart = row.running_since ?? row.last_started_at;
  const finals = finalRuns(recent);
  return {
    job,
    state: disabled ? 'disabled' : row.running_run_id !== null ? 'running' : 'idle',
    ...row,
    disabled_fleet_wide: byFleet,
    next_due_at: row.min_interval_ms !== null && lastStart !== null ? new Date(Date.parse(lastStart) + dueAfterMs(row.min_interval_ms)).toISOString() : null,
    success_rate: finals.length === 0 ? null : finals.filter((r) => r.status === 'succeeded').length / finals.length,
    duration_median_ms: percentile(durations, 0.5),
    duration_p95_ms: percentile(durations, 0.95),
    // A hold whose window has passed was a loop's that vanished (SIGKILL) before it said so.
    holding:
      holding_host !== null && holding_pid !== null && holding_until !== null && holding_lock !== null && Date.parse(holding_until) > Date.now()
        ? { host: holding_host, pid: Number(holding_pid), until: holding_until, lock: holding_lock, key: holding_key }
        : null,
    failed_requests: failedRequestsOf(failed_requests),
  };
}

function failedRequestsOf(raw: unknown): FailedRequest[] {
  const list = (typeof raw === 'string' ? JSON.parse(raw) : (raw ?? [])) as { id: unknown; args: unknown; error: unknown }[];
  return list
    .map((r) => ({
      id: Number(r.id),
      args: (typeof r.args === 'string' ? JSON.parse(r.args) : r.args) as string[],
      error: (r.error ?? null) as string | null,
    }))
    .sort((a, b) => b.id - a.id)
    .slice(0, FAILED_REQUESTS);
}

// Whether a job is failing: its last run did not succeed, or a target of its requests failed
// its latest time (a batch whose other targets succeed). The one rule of `status`, `check`,
// `metrics` and the web page (its count, its ?state=failing).
export function isFailing(j: Pick<JobStatus, 'last_status' | 'failed_requests'>): boolean {
  return (j.last_status !== null && j.last_status !== 'succeeded') || j.failed_requests.length > 0;
}

// A job's pause as its status row tells it (null: not paused).
export function pauseOf(job: JobStatus): Paused | null {
  if (job.state !== 'disabled') return null;
  return { reason: job.disabled_reason, since: job.disabled_since, by: job.disabled_by, until: job.disabled_until, fleet: job.disabled_fleet_wide };
}

// The start that spaces a job's runs (--min-interval, --scheduled): its running run's, else
// its latest's, unless that one was abandoned.
export function lastCountedStart(job: JobStatus): string | null {
  return job.running_since ?? (job.last_status === 'abandoned' ? null : job.last_started_at);
}

// When a run was last skipped because a stranger held the lock, if no run started since.
export function blockedSince(job: JobStatus): string | null {
  if (job.blocked_at === null || job.blocked_by === null) return null;
  const lastStart = job.running_since ?? job.last_started_at;
  return lastStart !== null && Date.parse(lastStart) >= Date.parse(job.blocked_at) ? null : job.blocked_at;
}

// Nearest rank: always a duration some run really took.
function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] as number;
}

// The targets whose latest request failed, named: "2 targets failed their latest request: web3 (cannot reach web3), db1".
export function failedTargets(job: Pick<JobStatus, 'failed_requests'>): string {
  const shown = job.failed_requests.slice(0, 5).map((r) => `${r.args.join(' ')}${r.error ? ` (${r.error})` : ''}`);
  const more = job.failed_requests.length > shown.length ? `, and ${job.failed_requests.length - shown.length} more` : '';
  const n = job.failed_requests.length;
  return `${n} target${n === 1 ? '' : 's'} failed ${n === 1 ? 'its' : 'their'} latest request: ${shown.join(', ')}${more}`;
}

