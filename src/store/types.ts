import type { Holding, JobStatus, Paused, PauseEvent } from './jobs.js';
import type { Cancellation, NewRequest, RequestRow, SettledRequest, Unserved } from './requests.js';
import type { LeaseRow } from './leases.js';
import type { SpooledRun } from './spool.js';
import type { Admission, AdmitOptions, Holder } from './admission.js';

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
  // The scheduled minute this run belongs to (null for manual runs), and the lock it held.
  tick: string | null;
  lock_backend: string | null;
  lock_key: string | null;
  // One key per run, made up by the client (see newRunKey); when the invocation began
  // (started_at is when it got the lock); the wrapper's boot id and start time.
  run_key: string | null;
  invoked_at: string | null;
  wrapper_start: string | null;
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

export interface RunStore {
  // Decides, under a lock already held, whether the run may start, and if so inserts its
  // `running` row, in one transaction: marks this job's `running` rows on this host whose
  // wrapper is gone as `abandoned` and folds in overlaps counted before the row existed.
  // A refusal for the tick counts as a skip of the run that had the tick.
  admit(run: NewRun, options: AdmitOptions): Promise<Admission>;
  // The command started (its pid, and its command line with the requests' arguments).
  setChildPid(id: number, childPid: number, command: string): Promise<void>;
  // Records the outcome; on the last attempt (`final`), the requests of the run end with it.
  // `unlock`: a lock the store holds (see LockRelease) to release in the same round trip;
  // returns whether it was released (never, by a store without such locks).
  finishRun(id: number, outcome: RunOutcome, final: boolean, unlock?: LockRelease | null): Promise<boolean>;
  // An invocation's final outcome (run `runId`), for its notifiers (--notify): notes it as the
  // job's wanted alert state, then claims, for `token` and at most `forMs`, the delivery of a
  // change from the state last delivered. Null when there is nothing to say, or another
  // invocation is delivering one (it says this outcome's once it is done: alertSent).
  wantAlert(job: string, failing: boolean, runId: number | null, token: string, forMs: number): Promise<AlertClaim | null>;
  // The delivery `token` claimed ended: `delivered`, the state it said (null: none delivered,
  // and the next outcome tries again). Frees the claim, and claims again what the latest
  // outcome wants when that is still not what was delivered (another came meanwhile).
  alertSent(job: string, token: string, delivered: boolean | null, forMs: number): Promise<AlertClaim | null>;
  // Asks a running run's wrapper to stop it (a later request replaces an earlier one);
  // false when the run is not `running` (any more). `between`: the run has ended but its
  // wrapper lives on, between a retry's attempts or a loop's runs (see stop-between.ts).
  requestStop(runId: number, stop: StopRequest, between?: boolean): Promise<boolean>;
  // The stop asked of a run, or null: its wrapper's question while the command runs.
  stopRequest(runId: number): Promise<StopRequest | null>;
  // Rewrites a finished run's `error` (a run replaced by another names its successor), once:
  // a second --replace that ran after the first finds the run named by the first.
  amendError(runId: number, error: string): Promise<void>;
  // Gives back claimed requests the run will not serve (see Unserved).
  returnRequests(runId: number, unserved: Unserved): Promise<void>;
  // Ends some of the requests run `runId` serves now, each with its own outcome (a batch's
  // results by argument); the run's last attempt ends the others with its own.
  settleRequests(runId: number, settled: readonly SettledRequest[]): Promise<void>;
  // A retry of run `previous`: a new row, which the requests follow; returns its id.
  startRetry(previous: number, run: NewRun): Promise<number>;
  // Counts an invocation skipped because the lock was held, on the run that holds it
  // (on `host` only, when the lock is local to a host; `holderPid`: the pid that took a
  // local lock, whose run's leftovers may hold it still); returns that run, if known.
  recordOverlap(job: string, host: string | null, holderPid: number | null): Promise<Holder | null>;
  // Notes a skip because a local lock was held by a user who does not share the job (`by`
  // names them), for status and check.
  recordBlocked(job: string, by: string): Promise<void>;
  // A loop (--for) holds the job's lock between its runs until `holding.until` (null: it let
  // the lock go), for status, locks and the web page: the lock is busy with no run running.
  setHolding(job: string, holding: Holding | null): Promise<void>;
  // Writes a run recorded while this store was unreachable (see Spool), or one that never
  // started; returns its id.
  importRun(record: SpooledRun): Promise<number>;
  // The server's identity (PostgreSQL: its system identifier), for the spool; null if unknown.
  serverIdentity?(): Promise<string | null>;
  // Whether the log holds the run of this run key: the spool's proof that a server of that
  // identity is the one a record was made for (see Spool).
  holdsRun?(runKey: string): Promise<boolean>;
  listRuns(filter: RunFilter): Promise<RunRow[]>;
  getRun(id: number): Promise<RunRow | null>;
  // The run with only the last `chars` characters of its output, cut in SQL.
  runTail(id: number, chars: number): Promise<RunTail | null>;
  latestRun(job: string): Promise<RunRow | null>;
  addRequest(request: NewRequest): Promise<number>;
  cancelRequest(id: number): Promise<Cancellation>;
  getRequest(id: number): Promise<RequestRow | null>;
  listRequests(job: string | null, limit: number): Promise<RequestRow[]>;
  // Whether a request for the job is due: cheap, for loops waiting for one.
  hasDueRequest(job: string): Promise<boolean>;
  // The job's runs still `running`, and those whose claims are: what its next admission may
  // find its wrapper gone and settle (asked before a shared lock is taken, see due.ts).
  unsettledRuns(job: string): Promise<UnsettledRun[]>;
  // Calls `wake` whenever a request for the job is made, where the store can tell at once
  // (PostgreSQL's NOTIFY); elsewhere loops poll hasDueRequest.
  listenForRequests?(job: string, wake: () => void): Promise<void>;
  // The store's connection is gone (PostgreSQL): a fresh one may do better.
  readonly connectionLost?: boolean;
  // Pauses (with why, by whom, until when) or resumes a job, and keeps it as an event
  // (`by`: who, user@host; `at`: when).
  setPaused(job: string, paused: Paused | null, by: string, at: string): Promise<void>;
  // The same for the fleet's pause (`disable --all`), which every admission judges besides
  // the job's own, under the lock; returns whether it changed (a resume of no pause
  // does not: nothing is kept). A pause waits for admissions under way, so runs any of
  // them admitted are `running` when it returns (drain counts on it).
  setFleetPause(paused: Paused | null, by: string, at: string): Promise<boolean>;
  // The fleet's pause when it holds now, by the store's clock (its `until` not passed).
  fleetPause(): Promise<Paused | null>;
  // The pauses and resumes of a job and of the fleet, newest first.
  pauseEvents(job: string, limit: number): Promise<PauseEvent[]>;
  // Stores a job's schedule, as parseSchedule() spelled it; null clears it.
  setSchedule(job: string, schedule: string | null): Promise<void>;
  jobStatus(job: string | null): Promise<JobStatus[]>;
  // Leases held now (-l lease), where the store keeps them (PostgreSQL, from migration 0014).
  leases?(): Promise<LeaseRow[]>;
  // Deletes old finished runs and requests in short batches (see PruneOptions).
  prune(options: PruneOptions): Promise<PruneResult>;
  // Claims a periodic task (the automatic prune) for this invocation when it last ran
  // `everyMs` ago or more, for the whole log; `releaseTask` makes it due again at once.
  claimTask(task: string, everyMs: number): Promise<boolean>;
  releaseTask(task: string): Promise<void>;
  // Applies pending migrations; returns the schema version now in place.
  migrate(): Promise<number>;
  close(): Promise<void>;
}
