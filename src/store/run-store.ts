import type { Admission, AdmitOptions, Holder } from './admission.js';
import type { Holding, JobStatus, Paused, PauseEvent } from './jobs.js';
import type { Cancellation, NewRequest, RequestRow, SettledRequest, Unserved } from './requests.js';
import type { SpooledRun } from './spool-record.js';
import type { AlertClaim, LeaseRow, LockRelease, NewRun, PruneOptions, PruneResult, RunFilter, RunOutcome, RunRow, RunTail, StopRequest, UnsettledRun } from './types.js';

// The run log, as the supervisor and the subcommands see it, whatever database is behind it.
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
  // wrapper lives on, between a retry's attempts or a loop's runs (see run/stop/stop-between.ts).
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
  // find its wrapper gone and settle (asked before a shared lock is taken, see run/loop/due.ts).
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
