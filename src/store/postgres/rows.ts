// The PostgreSQL store's rows as cronguard's types have them (ids as numbers, times as ISO
// text), and the run and outcome as its statements take them.
import { printable } from '../../util/printable.js';
import type { HolderRow, Refusal, ScheduledRule } from '../admission.js';
import { type JobStatus, type JobStatusRow, jobStatusOf, type Paused, type PauseEvent, type RecentRun } from '../jobs.js';
import type { RequestRow } from '../requests.js';
import type { StoredOutcome } from '../spool-record.js';
import type { NewRun, RunningRow, RunRow } from '../types.js';

// What the admit() function returns (migration 0005).
export interface AdmitResult {
  admitted: boolean;
  reason: Refusal | 'reentered';
  id?: number;
  // As jsonb has them: what a row holds, checked by claimedRequest.
  requests: { id: number; args: unknown }[];
  running?: RunningRow[];
  // 'slots': with what tells whether its wrapper is gone, when it is this host's.
  holder?: (HolderRow & Partial<Pick<RunningRow, 'wrapper_start' | 'lock_backend' | 'lock_key'>>) | null;
  disabled?: Paused | null;
  last_started_at?: string | null;
  // 'schedule' and 'unscheduled' (migration 0019).
  schedule?: string;
  problem?: string | null;
  warn?: boolean;
  // 'slots' (migration 0028): the --max-running the running copy (`holder`) was given.
  max_running?: number;
  version: number | null;
}

// A refusal by the stored schedule, as the other stores say it (store/types.ts): when it
// next fires is croner's to tell, from what admit() read.
export function scheduleRefusal(r: AdmitResult, rule: ScheduledRule | null, nowMs: number) {
  if (r.reason === 'unscheduled') return { problem: r.problem ?? null, warn: r.warn === true };
  if (r.reason !== 'schedule' || rule === null) return {};
  const last = r.last_started_at ? Date.parse(r.last_started_at) : null;
  const verdict = rule.verdict(r.schedule ?? null, null, last, nowMs);
  return { schedule: printable(r.schedule ?? ''), nextAt: verdict.due ? new Date(nowMs).toISOString() : (verdict.refusal.nextAt ?? new Date(nowMs).toISOString()) };
}

export type PgRow = Omit<RunRow, 'id' | 'started_at' | 'finished_at' | 'duration_ms' | 'request_id' | 'tick' | 'invoked_at'> & {
  id: string;
  started_at: Date;
  finished_at: Date | null;
  tick: Date | null;
  invoked_at: Date | null;
  duration_ms: string | null;
  request_id: string | null;
};

// This host's current minute: a claimed tick beyond it came from a clock running ahead.
export function minuteNow(): Date {
  return new Date(Math.floor(Date.now() / 60_000) * 60_000);
}

// The run as admit() reads it: JSON, times as ISO text.
export function runJson(run: NewRun): Record<string, unknown> {
  return {
    ...runValues(run),
    started_at: run.startedAt.toISOString(),
    invoked_at: run.invokedAt.toISOString(),
    tick: run.tick?.toISOString() ?? null,
  };
}

export function runValues(run: NewRun): Record<string, unknown> {
  return {
    job: run.job, host: run.host, trigger: run.trigger, attempt: run.attempt, pid: run.pid, username: run.username,
    command: run.command, started_at: run.startedAt, tick: run.tick, lock_backend: run.lockBackend, lock_key: run.lockKey,
    run_key: run.runKey, invoked_at: run.invokedAt, wrapper_start: run.wrapperStart,
    // A spooled record from before --max-running has neither: it ran in slot 0 of 1.
    slot: run.slot ?? 0, max_running: run.maxRunning ?? 1,
  };
}

export function outcomeValues(o: StoredOutcome): Record<string, unknown> {
  return {
    status: o.status, finished_at: new Date(o.finishedAt), duration_ms: o.durationMs, exit_code: o.exitCode, signal: o.signal,
    // PostgreSQL text cannot hold NUL bytes.
    output: o.output === null ? null : o.output.replaceAll('\0', ''),
    output_truncated: o.outputTruncated, error: o.error,
  };
}

export function toRunRow(row: PgRow): RunRow {
  return {
    ...row,
    id: Number(row.id),
    started_at: row.started_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
    tick: row.tick?.toISOString() ?? null,
    invoked_at: row.invoked_at?.toISOString() ?? null,
    duration_ms: row.duration_ms === null ? null : Number(row.duration_ms),
    request_id: row.request_id === null ? null : Number(row.request_id),
  };
}

export type PgRequest = Omit<RequestRow, 'id' | 'run_id' | 'requested_at' | 'not_before' | 'claimed_at' | 'finished_at'> & {
  id: string;
  run_id: string | null;
  requested_at: Date;
  not_before: Date;
  claimed_at: Date | null;
  finished_at: Date | null;
};

export function toRequestRow(r: PgRequest): RequestRow {
  return {
    ...r,
    id: Number(r.id),
    run_id: r.run_id === null ? null : Number(r.run_id),
    requested_at: r.requested_at.toISOString(),
    not_before: r.not_before.toISOString(),
    claimed_at: r.claimed_at?.toISOString() ?? null,
    finished_at: r.finished_at?.toISOString() ?? null,
  };
}

// A job's row as pg returns it: bigints as text, times as Date, its recent runs as
// 'id status duration_ms retried' joined by commas ('-' for no duration, retried 1 or 0).
export type PgJobStatus = Record<string, unknown> & Pick<JobStatusRow, 'job' | 'disabled' | 'runs_total'> & { recent: string };

const NUMBERS = ['running_run_id', 'last_run_id', 'last_success_run_id', 'min_interval_ms', 'last_duration_ms', 'last_success_duration_ms'];

export function toJobStatus(row: PgJobStatus, fleet: Paused | null): JobStatus {
  const out: Record<string, unknown> = { ...row };
  for (const [key, value] of Object.entries(row)) {
    if (value instanceof Date) out[key] = value.toISOString();
    else if (NUMBERS.includes(key) && value !== null) out[key] = Number(value);
  }
  out.recent = row.recent === '' ? [] : row.recent.split(',').map(recentRun);
  return jobStatusOf(out as JobStatusRow, fleet);
}

// A pause as a row or as jsonb has it (times as Date, or as text with an offset), in ISO UTC.
export function toPaused(row: Record<string, unknown>, fleet: boolean): Paused {
  return { reason: (row.reason ?? null) as string | null, since: isoOf(row.since), by: (row.by ?? null) as string | null, until: isoOf(row.until), fleet };
}

export function toPauseEvent(row: Record<string, unknown>): PauseEvent {
  return {
    id: Number(row.id), job: (row.job ?? null) as string | null, action: row.action as PauseEvent['action'], at: isoOf(row.at) as string,
    by: row.by as string, reason: (row.reason ?? null) as string | null, until: isoOf(row.until), fleet_wide: row.job === null,
  };
}

function isoOf(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const at = value instanceof Date ? value : new Date(String(value));
  return Number.isNaN(at.getTime()) ? String(value) : at.toISOString();
}

function recentRun(text: string): RecentRun {
  const [id, status, duration, retried] = text.split(' ') as [string, string, string, string];
  return { id: Number(id), status, duration_ms: duration === '-' ? null : Number(duration), retried: retried === '1' };
}

// An advisory lock held by a cronguard session. `job` is its application_name's tail, cut
// at 63 bytes by PostgreSQL; the run row has the full name.
export interface AdvisoryLock {
  job: string;
  key: string;
  backend_pid: number;
  client: string;
  since: string | null;
}
