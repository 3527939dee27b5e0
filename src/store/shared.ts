import type { CronguardError } from '../errors.js';
import type { Lock, LockBackend } from '../lock/backend.js';
import type { LockSpec } from '../lock/lock-spec.js';
import type { Admission, AdmitOptions } from './admission.js';
import type { RunStore } from './run-store.js';
import type { Spool } from './spool.js';
import type { LockRelease, LockRequest, NewRun } from './types.js';

// The fleet's database (--db) as the run path sees it: a run log with its spool, and the
// locks its admission statement can take. A dialect implements it in a file of its own
// (PostgreSQL: postgres/shared.ts), loaded with its driver only when a run uses it, so that
// run/ connects, records and locks without learning which database it is.

// A connection to the database, counted for --verbose.
export interface SharedSession {
  readonly roundTrips: number;
  readonly heartbeats: number;
  // The connection is gone (killed, cut, the server restarted); not after a close of our own.
  readonly connectionLost: boolean;
  // Until called again with null, a statement still unanswered at `atMs` (monotonicMs), or a
  // few seconds after it was sent if later, ends the session: a waiter's (-w) statement held
  // where nothing answers it (a pooler's queue for a server that is down) ends with its wait.
  answerBy(atMs: number | null): void;
}

// What the run log of an invocation is made of (see run/log-link.ts).
export interface RecorderParts {
  readonly store: RunStore | null;
  // Where records go when the store fails; null: they are dropped (embedded store).
  readonly spool: Spool | null;
  // Opens a fresh store after the first one failed (e.g. its connection was lost); an aborted
  // `abort` gives up connecting.
  readonly reopen: ((abort?: AbortSignal) => Promise<SharedStore>) | null;
  // Why the store could not be opened at all, if it could not.
  readonly openError: unknown;
  readonly where: string;
  // Whether a failure of the store is a missing privilege (its warning says so: that is
  // what the operator must grant); the dialect's answer.
  readonly denied?: (error: unknown) => boolean;
}

// A lock taken by the run log's admission statement, in the same round trip that applies
// the fleet rule, the interval, the pause and the request claims (the advisory lock, a
// lease). The run path sees the Lock it yields, like any other.
export interface DatabaseLock {
  readonly description: string;
  // What the admission statement is asked to take.
  readonly request: LockRequest;
  // The lock taken alone, when the log cannot record the run (its session's advisory lock);
  // null: the lock lives in the log (a lease), and without the log there is none (69).
  readonly alone: { tryOnce(): Promise<Lock | null>; readonly backend: LockBackend } | null;
  // A command under it dies with cronguard: its watchdog can start while the server works.
  readonly spareWatchdog: boolean;
  // The admission statement (sent at `sentAt`, monotonicMs) ended holding the lock: the
  // lock, and what the outcome statement releases.
  taken(admitted: LockedAdmission, sentAt: number): { readonly lock: Lock; readonly release: LockRelease; releasedElsewhere(): void };
  close(): Promise<void>;
}

// An admission under a database lock, and the server session that took it (holding: the
// lock is held once the admission has decided).
export interface LockedAdmission {
  readonly admission: Admission;
  readonly backend: number;
  // When that session's server process started (PostgreSQL's BACKEND_START), if known.
  readonly backendStart: string | null;
  readonly holding: boolean;
  // The lease's epoch (its fencing token) when the admission took a lease and holds it.
  readonly epoch: bigint | null;
  // When (monotonicMs) the admission statement that decided was sent: a lease it took
  // expires a ttl after that at the earliest. Not before: creating or upgrading the schema
  // first may take seconds, and a lease counted from before would look lost.
  readonly sentAt: number;
}

// The shared run log's store: it can also take a database lock in its admission statement.
export interface SharedStore extends RunStore {
  readonly session: SharedSession;
  // Its session is gone: a statement's failure is the connection's, not the log's.
  readonly connectionLost: boolean;
  lockAndAdmit(run: NewRun, lock: LockRequest, options: AdmitOptions, countSkip: boolean): Promise<LockedAdmission>;
  // From now on, a statement left unanswered this long ends the session (the web page's
  // bound on a database that stopped answering).
  answerWithin(ms: number): void;
  // Lets a role of the database write requests and read the log (`migrate --group`); says
  // so in the dialect's words.
  allowRequests(role: string): Promise<string>;
  // The database locks (see ServerLock) held right now, for `cronguard locks`.
  databaseLocks(): Promise<ServerLock[]>;
}

// A database lock held right now by a server session: PostgreSQL's advisory lock of a
// cronguard session, MySQL's GET_LOCK name of a job of this log. `lock` and `key` are what
// the run rows under it record as lock_backend and lock_key.
export interface ServerLock {
  readonly lock: string;
  readonly key: string;
  readonly job: string;
  // The key is the job's own in this log's schema (else: a --lock-key, or another schema's).
  readonly jobsOwn: boolean;
  // The server session holding it (a backend pid, a connection id) and where it connects from.
  readonly holder: number;
  readonly client: string | null;
  // Since when, where the server tells (PostgreSQL: its session's start).
  readonly since: string | null;
}

export interface SharedLog {
  readonly parts: RecorderParts;
  readonly store: SharedStore | null;
}

// A host's memory that the log's schema was found current (a stamp file in the state dir,
// run/gate/log-open.ts): with it, a run sends no statement to ask.
export interface SchemaMemory {
  readonly current: boolean;
  remember(): void;
  forget(): void;
}

export interface SharedDatabase {
  // What the server is called in messages: PostgreSQL, MySQL.
  readonly name: string;
  // A session of its own for the database's session lock (PostgreSQL's advisory lock,
  // MySQL's GET_LOCK), connecting now. Without it nothing runs.
  connectLock(abort: AbortSignal): Promise<SharedSession>;
  // The run log, on the lock's session when there is one. `memory` makes the schema stamp
  // for the dialect's schema version. A signal stops its first connection, never a
  // reconnection to record an outcome.
  openLog(lockSession: SharedSession | null, memory: (version: number) => SchemaMemory, abort?: AbortSignal): Promise<SharedLog>;
  // The session lock on `session` (connectLock's), which the log's admission statement
  // takes. Each dialect takes the kind of its own (the CLI pairs them).
  sessionLock(session: SharedSession, lock: Extract<LockSpec, { kind: 'advisory' | 'named' }>): Promise<DatabaseLock>;
  // A lease in the log `store`, which its admission statement takes; without the log
  // (`openError` says why it did not open) there is no lock.
  leaseLock(store: SharedStore | null, openError: unknown, lock: Extract<LockSpec, { kind: 'lease' }>): Promise<DatabaseLock>;
  // A session (the log's, the lock's) lost while it held nothing, a waiter's between its tries
  // (a server restarted), connected again in place as it was first: the store and the locks
  // on it carry on over the new connection. Fails as connecting fails.
  reconnect(session: SharedSession, abort: AbortSignal): Promise<void>;
  // The one line, and exit code, a failure of this database ends in.
  error(error: unknown): CronguardError;
  // The server answered with an error (the log's); anything else is the connection.
  isServerError(error: unknown): boolean;
  // The run's refusal when `error` says the server is read-only (a standby, a replica), else
  // null: a lock taken there alone would fence nothing.
  readOnly(error: unknown): CronguardError | null;
}

// What the fleet's database needs of one run: its job, how long it may wait (a busy server is
// retried as long), where its spool lives, and the lock it takes there, if any.
export interface FleetRun {
  readonly name: string;
  readonly waitMs: number;
  readonly stateDir: string;
  readonly lock: LockSpec;
}
