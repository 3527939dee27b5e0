// The run log's rows and records, whatever database holds them.

export const RUN_STATUSES = [
  'running',
  'succeeded',
  'failed',
  'timed_out',
  'killed',
  'lock_lost',
  'abandoned',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export type Trigger = 'cron' | 'manual' | 'request' | 'retry';

// One row of `runs`, keyed by the contract's column names (also the --json shape).
export interface RunRow {
  id: number;
  job: string;
  status: RunStatus;
  trigger: Trigger;
  attempt: number;
  host: string;
  pid: number;
  child_pid: number | null;
  username: string | null;
  command: string;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  exit_code: number | null;
  signal: string | null;
  output: string | null;
  output_truncated: boolean;
  overlaps: number;
  request_id: number | null;
  error: string | null;
  // The scheduled minute this run belongs to (null for manual runs), and the lock it held.
  tick: string | null;
  lock_backend: string | null;
  lock_key: string | null;
  // One key per run, made up by the client (see newRunKey); when the invocation began
  // (started_at is when it got the lock); the wrapper's boot id and start time.
  run_key: string | null;
  invoked_at: string | null;
  wrapper_start: string | null;
  // The slot of the job's lock it held, and the N of --max-running (null: before both).
  slot: number | null;
  max_running: number | null;
}

export interface NewRun {
  readonly job: string;
  readonly trigger: Trigger;
  readonly attempt: number;
  readonly host: string;
  readonly pid: number;
  readonly username: string | null;
  readonly command: string;
  // When it got the lock; invokedAt is when the invocation began.
  readonly startedAt: Date;
  readonly invokedAt: Date;
  // The host-local minute the invocation started in; null for a manual run, which belongs
  // to no tick.
  readonly tick: Date | null;
  readonly lockBackend: string;
  readonly lockKey: string | null;
  // Which of the job's slots (--max-running) it holds, and how many the job has.
  readonly slot: number;
  readonly maxRunning: number;
  readonly runKey: string;
  readonly wrapperStart: string | null;
}

// A `running` row of this host, as admit sees it when deciding whether its wrapper is gone.
export interface RunningRow {
  readonly id: number;
  readonly pid: number;
  readonly wrapper_start: string | null;
  readonly lock_backend: string | null;
  readonly lock_key: string | null;
}

// A run of a job that an admission under a lock may have to settle: one still `running`, or
// one whose requests are (see unsettledRuns).
export interface UnsettledRun extends RunningRow {
  readonly status: string;
  readonly host: string;
}

export interface RunOutcome {
  readonly status: Exclude<RunStatus, 'running' | 'abandoned'>;
  readonly finishedAt: Date;
  readonly durationMs: number;
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly output: string | null;
  readonly outputTruncated: boolean;
  readonly error: string | null;
}

export interface RunFilter {
  // Runs of any of these jobs (all jobs when absent or empty).
  readonly jobs?: readonly string[];
  readonly status?: RunStatus;
  readonly host?: string;
  // Runs that held this slot of their job's lock (--max-running); a run from before slots,
  // or of a job without them, held slot 0.
  readonly slot?: number;
  // Started at or after this time (ISO).
  readonly since?: string;
  // Older than this run (paging, newest first).
  readonly beforeId?: number;
  readonly limit: number;
  // Each run's output too (history --json). Lists leave it null, unread: one output can be
  // many megabytes, and a page of runs shows none of it.
  readonly withOutput?: boolean;
}

// A run with only the end of its output, as its page shows it; output_cut: there was more.
export type RunTail = RunRow & { readonly output_cut: boolean };

// Rows deleted per statement: small enough that a batch holds up a run for milliseconds.
export const PRUNE_BATCH = 1000;

export interface PruneOptions {
  // Finished runs that started before this go (and requests that ended before it).
  readonly before: Date;
  // Each job keeps its latest `keep` runs whatever their age (and its latest success).
  readonly keep: number;
  // Stop after this moment (monotonicMs), leaving the rest for next time.
  readonly deadline: number;
}

export interface PruneResult {
  readonly runs: number;
  readonly requests: number;
  // Everything old enough went; false when the deadline came first.
  readonly complete: boolean;
}

// A lock in the store's database that the outcome releases: its session's advisory lock
// (PostgreSQL's key, MySQL's GET_LOCK name), or a lease (its key and this holder's epoch).
export type LockRelease = { readonly kind: 'advisory'; readonly key: bigint } | { readonly kind: 'named'; readonly name: string } | { readonly kind: 'lease'; readonly key: bigint; readonly epoch: bigint };

// What an admission statement is asked to take with the run (see PostgresStore.lockAndAdmit).
export type LockRequest = { readonly kind: 'advisory'; readonly key: bigint } | { readonly kind: 'named'; readonly name: string } | { readonly kind: 'lease'; readonly key: bigint; readonly ttlMs: number };

// A change of a job's alert state to deliver now: to failing or back, told of run `runId`.
export interface AlertClaim {
  readonly failing: boolean;
  readonly runId: number | null;
}

// A request to stop a running run (cronguard stop, --replace): the signal for its command's
// process group, and who asked ("alice@web1 (cronguard stop)"), read by the run's wrapper.
export interface StopRequest {
  readonly signal: NodeJS.Signals;
  readonly by: string;
}

// A lease held now (see migration 0014), for `locks`, `status` and the web page.
export interface LeaseRow {
  readonly job: string;
  readonly host: string;
  readonly pid: number;
  readonly run_id: string | null;
  readonly epoch: string;
  readonly key: string;
  readonly acquired_at: Date;
  readonly expires_at: Date;
  readonly expires_in_ms: string;
}
