import type { SpooledRun } from './spool.js';

// The run log, as the supervisor and the subcommands see it, whatever database is behind it.

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
}

export interface NewRun {
  readonly job: string;
  readonly trigger: Trigger;
  readonly attempt: number;
  readonly host: string;
  readonly pid: number;
  readonly username: string | null;
  readonly command: string;
  readonly startedAt: Date;
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
  readonly job?: string;
  readonly status?: RunStatus;
  readonly limit: number;
}

export interface RunStore {
  // Inserts the `running` row. First marks this job's `running` rows on this host whose
  // wrapper is gone as `abandoned`, and folds in overlaps counted before the row existed.
  startRun(run: NewRun, isAlive: (pid: number) => boolean): Promise<number>;
  setChildPid(id: number, childPid: number): Promise<void>;
  finishRun(id: number, outcome: RunOutcome): Promise<void>;
  // Counts an invocation skipped because the lock was held, on the run that holds it
  // (on `host` only, when the lock is local to a host).
  recordOverlap(job: string, host?: string | null): Promise<void>;
  // Writes a run recorded while this store was unreachable (see Spool).
  importRun(record: SpooledRun): Promise<void>;
  listRuns(filter: RunFilter): Promise<RunRow[]>;
  getRun(id: number): Promise<RunRow | null>;
  latestRun(job: string): Promise<RunRow | null>;
  // Applies pending migrations; returns the schema version now in place.
  migrate(): Promise<number>;
  close(): Promise<void>;
}
