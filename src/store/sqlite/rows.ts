// The SQLite store's rows as cronguard's types have them (flags as booleans, arguments as
// lists, times as ISO text), and the run and outcome as its statements take them.
import type { RequestRow } from '../requests.js';
import type { StoredOutcome } from '../spool-record.js';
import type { NewRun, RunRow } from '../types.js';

export type Row = Omit<RunRow, 'output_truncated'> & { output_truncated: number };
export type RequestRecord = Omit<RequestRow, 'args'> & { args: string };

// A new run's named parameters.
export function runParams(run: NewRun): Record<string, unknown> {
  return {
    job: run.job, host: run.host, trigger: run.trigger, attempt: run.attempt, pid: run.pid, username: run.username,
    command: run.command, started_at: run.startedAt.toISOString(), tick: run.tick?.toISOString() ?? null,
    lock_backend: run.lockBackend, lock_key: run.lockKey, run_key: run.runKey, invoked_at: run.invokedAt.toISOString(),
    wrapper_start: run.wrapperStart, slot: run.slot ?? 0, max_running: run.maxRunning ?? 1,
  };
}

export function outcomeParams(o: StoredOutcome): Record<string, unknown> {
  return {
    status: o.status, finished_at: o.finishedAt, duration_ms: o.durationMs, exit_code: o.exitCode, signal: o.signal,
    output: o.output, output_truncated: o.outputTruncated ? 1 : 0, error: o.error,
  };
}

export function toRunRow(row: Row): RunRow {
  return { ...row, output_truncated: row.output_truncated === 1 };
}

export function toRequestRow(row: RequestRecord): RequestRow {
  return { ...row, args: JSON.parse(row.args) as string[], not_before: isoTime(row.not_before) };
}

// A UTC time SQLite's datetime() wrote ('2026-12-01 18:00:00'), as the ISO time the log keeps.
function isoTime(text: string): string {
  return /^\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d(\.\d+)?)?$/.test(text) ? `${text.replace(' ', 'T')}Z` : text;
}
