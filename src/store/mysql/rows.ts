// The MySQL store's rows as cronguard's types have them, and the run and outcome as its
// statements take them. The session gives DATETIME as Date (UTC), BIGINT as number, BOOLEAN
// as 0/1 and JSON as its text (see connect.ts).

import { type Holder, type HolderRow, toHolder as toAnyHolder } from '../admission.js';
import { type JobStatus, type JobStatusRow, jobStatusOf, type Paused, RECENT_RUNS, type RecentRun } from '../jobs.js';
import type { RequestRow } from '../requests.js';
import type { StoredOutcome } from '../spool-record.js';
import type { NewRun, RunRow } from '../types.js';

export type Time = Date | string | null;

// A time as the log keeps it (ISO, UTC), from a Date or the server's text.
export function iso(value: Time): string | null {
  if (value === null) return null;
  if (value instanceof Date) return value.toISOString();
  return new Date(/[zZ]|[+-]\d\d:?\d\d$/.test(value) ? value : `${value.replace(' ', 'T')}Z`).toISOString();
}

// A new run's values, in the order of sql.ts's RUN_COLUMNS.
export function runParams(run: NewRun): unknown[] {
  return [
    run.job, run.host, run.trigger, run.attempt, run.pid, run.username, run.command, run.startedAt, run.tick, run.lockBackend,
    run.lockKey, run.runKey, run.invokedAt, run.wrapperStart,
    // A spooled record from before --max-running held slot 0 of 1.
    run.slot ?? 0, run.maxRunning ?? 1,
  ];
}

// An outcome's values, in the order of its columns (status ... error). Its output is cut to
// its end that fits the server's largest packet as the driver sends it (a backslash before
// each of NUL, newline, return, quote, backslash and ^Z), less room for the rest of the
// statement: a longer one would be refused, and the server drops the connection with it, so
// that the run's record, spooled, would be refused again on every later run.
export function outcomeParams(o: StoredOutcome, maxPacketBytes: number): unknown[] {
  const output = o.output === null ? null : fittingEnd(o.output, maxPacketBytes - PACKET_ROOM);
  const truncated = o.outputTruncated || (output !== null && output.length < (o.output ?? '').length);
  return [o.status, new Date(o.finishedAt), o.durationMs, o.exitCode, o.signal, output, truncated ? 1 : 0, o.error];
}

// What a packet holds beside a run's output: the statements it is sent with, the error text.
const PACKET_ROOM = 256 * 1024;
const ESCAPED = new Set([0x00, 0x0a, 0x0d, 0x22, 0x27, 0x5c, 0x1a]);

// The end of `text` whose escaped UTF-8 takes at most `bytes`, beginning on a whole character.
function fittingEnd(text: string, bytes: number): string {
  const utf8 = Buffer.from(text);
  if (utf8.length * 2 <= bytes) return text;
  let start = utf8.length;
  for (let size = 0; start > 0; start--) {
    size += ESCAPED.has(utf8[start - 1] as number) ? 2 : 1;
    if (size > bytes) break;
  }
  if (start === 0) return text;
  while (start < utf8.length && ((utf8[start] as number) & 0xc0) === 0x80) start++;
  return utf8.subarray(start).toString();
}

export type MysqlRunRow = Omit<RunRow, 'started_at' | 'finished_at' | 'tick' | 'invoked_at' | 'output_truncated'> & {
  started_at: Time;
  finished_at: Time;
  tick: Time;
  invoked_at: Time;
  output_truncated: number;
};

export function toRunRow(row: MysqlRunRow): RunRow {
  return {
    ...row,
    id: Number(row.id),
    request_id: row.request_id === null ? null : Number(row.request_id),
    started_at: iso(row.started_at) as string,
    finished_at: iso(row.finished_at),
    tick: iso(row.tick),
    invoked_at: iso(row.invoked_at),
    output_truncated: Number(row.output_truncated) === 1,
  };
}


export function toHolder(row: HolderRow | undefined): Holder | null {
  return toAnyHolder(row, (value) => iso(value) as string);
}

export type MysqlRequest = Omit<RequestRow, 'args' | 'requested_at' | 'not_before' | 'claimed_at' | 'finished_at'> & {
  args: string;
  requested_at: Time;
  not_before: Time;
  claimed_at: Time;
  finished_at: Time;
};

export function toRequestRow(r: MysqlRequest): RequestRow {
  return {
    ...r,
    id: Number(r.id),
    run_id: r.run_id === null ? null : Number(r.run_id),
    args: parseJson(r.args) as string[],
    requested_at: iso(r.requested_at) as string,
    not_before: iso(r.not_before) as string,
    claimed_at: iso(r.claimed_at),
    finished_at: iso(r.finished_at),
  };
}

// JSON text as the session returns it; what is not JSON (a row written around the CHECK) is null.
export function parseJson(text: unknown): unknown {
  if (typeof text !== 'string') return text ?? null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export type MysqlJobStatus = Record<string, unknown> & { job: string; disabled: number; runs_total: string | null };

export interface RecentRow {
  job: string;
  id: number;
  status: string;
  duration_ms: number | null;
  trigger: string;
  attempt: number;
  host: string;
  pid: number;
}

const TIMES = ['disabled_since', 'disabled_until', 'last_seen_at', 'blocked_at', 'holding_until', 'running_since', 'last_started_at', 'last_finished_at', 'last_success_at'];

// A job's row with its recent runs (RecentRow, oldest first: its finished runs and the rows
// after them), as status, check, metrics and the web page take it.
export function toJobStatus(row: MysqlJobStatus, runs: readonly RecentRow[], fleet: Paused | null): JobStatus {
  const out: Record<string, unknown> = { ...row, disabled: Number(row.disabled) === 1 };
  for (const key of TIMES) out[key] = iso((row[key] ?? null) as Time);
  const totals = (parseJson(row.runs_total) ?? {}) as Record<string, unknown>;
  out.runs_total = Object.fromEntries(Object.entries(totals).map(([status, n]) => [status, Number(n)]));
  out.pending_requests = Number(row.pending_requests);
  out.recent = recentRuns(runs);
  return jobStatusOf(out as unknown as JobStatusRow, fleet);
}

// The latest RECENT_RUNS finished runs, oldest first; one that did not succeed is `retried`
// when the job's next row is its invocation's next attempt (see SQLite's jobStatus).
function recentRuns(runs: readonly RecentRow[]): RecentRun[] {
  const recent = runs.flatMap((y, i) => {
    if (y.status === 'running') return [];
    const z = runs[i + 1];
    const retried = y.status !== 'succeeded' && z !== undefined && z.trigger === 'retry' && z.attempt === y.attempt + 1 && z.host === y.host && z.pid === y.pid;
    return [{ id: Number(y.id), status: y.status, duration_ms: y.duration_ms === null ? null : Number(y.duration_ms), retried }];
  });
  return recent.slice(-RECENT_RUNS);
}
