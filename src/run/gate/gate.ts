import type { RunConfig } from '../../cli/config.js';
import { CronguardError } from '../../errors.js';
import type { Lock, LockBackend } from '../../lock/backend.js';
import { retryUntil } from '../../lock/backend.js';
import { openLockBackend } from '../../lock/index.js';
import { type AdmitOptions, keepsLock } from '../../store/admission.js';
import { dialectOf } from '../../store/dialects.js';
import { databaseOf } from '../../store/log-spec.js';
import type { ClaimedRequest } from '../../store/requests.js';
import type { DatabaseLock, LockedAdmission, SharedDatabase, SharedSession } from '../../store/shared.js';
import type { NewRun } from '../../store/types.js';
import { formatDuration } from '../../util/duration.js';
import type { Messages } from '../../util/io.js';
import type { Refused, RunRecorder, Verdict } from '../recorder.js';
import { prestartWatchdog } from '../supervisor/watchdog.js';
import { type OpenedLog, sharedLog, sqliteLog } from './log-open.js';

// Whether an invocation may run, and if so the lock it holds and the requests it serves. A
// loop (--for) that found nothing due yet holds the lock (`held`) to wait for work.
export type Entry =
  | { readonly admitted: true; readonly lock: Lock; readonly requests: readonly ClaimedRequest[] }
  | (Refused & { readonly held?: Lock; readonly reported?: boolean });

export interface Gate {
  readonly recorder: RunRecorder;
  // Which lock this is and where it lives, for --verbose.
  readonly description: string;
  // Takes the lock and records the start, or says why this invocation may not run. An
  // aborted `abort` ends a wait for the lock by throwing its reason.
  admit(abort: AbortSignal): Promise<Entry>;
  // The next run (--every, --for) while the lock is still held: the log's admission alone.
  readmit(run: NewRun): Promise<Verdict>;
  // Round trips to the fleet's database so far, for --verbose (0 without one).
  roundTrips(): RoundTrips;
  close(): Promise<void>;
}

export type GateOptions = AdmitOptions;

// The statements of the run, and apart from them, those of the lock's heartbeat.
export interface RoundTrips {
  // The database's name (PostgreSQL, MySQL), for the -v line.
  readonly database: string;
  readonly statements: number;
  readonly heartbeats: number;
}
const NONE: RoundTrips = { database: '', statements: 0, heartbeats: 0 };

// The run log alone, for an attempt that never takes a lock (126/127).
export async function openRecorder(config: RunConfig, say: Messages): Promise<RunRecorder> {
  if (config.log.kind === 'shared') return (await sharedLog(config, say, await dialectOf(config.log.db).database(config, config.log.db, say), null)).recorder;
  return sqliteLog(config, say);
}

// Puts together the lock and the run log the configuration asks for. An aborted `abort` (a
// signal) ends connecting to the database by throwing its reason.
export async function openGate(config: RunConfig, run: NewRun, options: GateOptions, say: Messages, abort: AbortSignal): Promise<Gate> {
  const db = databaseOf(config.log, config.lock);
  if (!db) {
    const backend = await openLockBackend(config.lock, say);
    return localGate(backend, await sqliteLog(config, say), run, config, options, say, () => NONE);
  }
  const database = await dialectOf(db).database(config, db, say);
  // A lock on a session of its own needs it: without it nothing runs (69). The log alone can wait.
  const lockSession = await database.connectLock(abort);
  const log: OpenedLog = config.log.kind === 'shared' ? await sharedLog(config, say, database, lockSession, abort) : { recorder: await sqliteLog(config, say), store: null };
  const sessions = () => [lockSession, log.store?.session, ...log.recorder.reopenedSessions].filter((s, i, all) => s && all.indexOf(s) === i) as SharedSession[];
  const roundTrips = () =>
    sessions().reduce((n, s) => ({ database: n.database, statements: n.statements + s.roundTrips, heartbeats: n.heartbeats + s.heartbeats }), { ...NONE, database: database.name });
  const dbLock = await database.databaseLock(lockSession, log.store, log.recorder.openFailure);
  if (!dbLock) return localGate(await openLockBackend(config.lock, say), log.recorder, run, config, options, say, roundTrips);
  return databaseGate(dbLock, database, log, run, config, options, say, roundTrips);
}

// One statement takes the lock, applies the fleet rule and records the run. If the log
// fails inside it (no privilege, a timeout), a lock that can be taken alone is, and the
// record spooled; never on a server that refused it as read-only.
function databaseGate(dbLock: DatabaseLock, database: SharedDatabase, log: OpenedLog, run: NewRun, config: RunConfig, options: GateOptions, say: Messages, roundTrips: () => RoundTrips): Gate {
  const fallback = dbLock.alone?.backend ?? { description: dbLock.description, acquire: async () => null };
  const gate = localGate(fallback, log.recorder, run, config, options, say, roundTrips);
  const close = async () => {
    await gate.close();
    await dbLock.close();
  };
  const combined = log.store;
  if (!combined) return { ...gate, close };
  const hold = (admitted: LockedAdmission, sentAt: number): Lock => {
    const { lock, release, releasedElsewhere } = dbLock.taken(admitted, sentAt);
    log.recorder.releasesLock(release, releasedElsewhere);
    return lock;
  };
  const attempt = async (): Promise<Entry | null> => {
    if (log.recorder.writable) {
      const stamped = atLock(run);
      try {
        const admitting = combined.lockAndAdmit(stamped, dbLock.request, options, config.waitMs === 0);
        // A command under a database lock needs a watchdog: it starts while the server works.
        if (dbLock.spareWatchdog) prestartWatchdog();
        const admitted = await admitting;
        const { admission } = admitted;
        const held = admitted.holding ? hold(admitted, admitted.sentAt) : null;
        if (!admission.admitted) {
          if (held && keepsLock(admission, options)) return { ...admission, held };
          return admission.reason !== 'locked' || config.waitMs === 0 ? admission : null;
        }
        log.recorder.adopt(admission.startedAt ? { ...stamped, startedAt: admission.startedAt } : stamped, admission.runId);
        return { admitted: true, lock: held as Lock, requests: admission.requests };
      } catch (error) {
        // A refusal of cronguard's own (a server connection shared by a pooler): nothing ran.
        if (error instanceof CronguardError) throw error;
        // A read-only server is a standby or a replica (one a pooler still passes off as the
        // primary): a lock taken there alone would run the job beside the primary's run.
        const readOnly = database.readOnly(error);
        if (readOnly) throw readOnly;
        // Only an error the server sent is the log's; anything else is the connection, and
        // without it there is no lock (69), though the statement may have committed.
        if (combined.connectionLost || !database.isServerError(error) || !dbLock.alone) {
          log.recorder.lostAdmission(stamped);
          throw database.error(error);
        }
        log.recorder.unavailable('record the start', error);
      }
    }
    if (!dbLock.alone) throw database.error(log.recorder.openFailure ?? new Error('the run log is out of reach'));
    const lock = await dbLock.alone.tryOnce();
    return lock && gate.admitHeld(lock);
  };
  const tell = waiting(config, dbLock.description, say);
  const admit = async (abort: AbortSignal): Promise<Entry> => {
    // Before the admission, as a local lock's gate does: a record of this host's that says
    // its run never started the command (the reply to its admission lost) gives its claims
    // back first, for this admission to serve, rather than the admission ending them failed
    // with the row it abandons.
    await log.recorder.deliverSpool();
    return (
      (await retryUntil(async () => (await attempt()) ?? tell(), config.waitMs, abort)) ??
      { admitted: false, reason: 'locked', holder: await log.recorder.overlap(config.name, null, null) }
    );
  };
  return { ...gate, description: dbLock.description, admit, close };
}

interface LocalGate extends Gate {
  // After the lock is held: the log's verdict, releasing the lock if it says no.
  admitHeld(lock: Lock): Promise<Entry>;
}

// A lock taken first, then the log asked (flock, lockfile, none; the postgres lock when
// the log is elsewhere or failed).
function localGate(
  backend: LockBackend,
  recorder: RunRecorder,
  run: NewRun,
  config: RunConfig,
  options: GateOptions,
  say: Messages,
  roundTrips: () => RoundTrips,
): LocalGate {
  const admitHeld = async (lock: Lock): Promise<Entry> => {
    await recorder.deliverSpool();
    const verdict = await recorder.admit(atLock(run), options);
    if (verdict.admitted) return { ...verdict, lock };
    if (keepsLock(verdict, options)) return { ...verdict, held: lock };
    await lock.release();
    return verdict;
  };
  // A loop's later admissions: a stored schedule is due at its time, not cron's jitter early;
  // the loop spaces its runs itself.
  const inLoop = { ...options, spacingMs: null, scheduled: options.scheduled?.inLoop() ?? null };
  return {
    recorder,
    description: backend.description,
    admitHeld,
    readmit: (next) => recorder.admit(atLock(next), inLoop),
    admit: async (abort) => {
      let lock = await backend.acquire({ waitMs: 0, abort });
      if (!lock && config.waitMs > 0) {
        waiting(config, backend.description, say)();
        lock = await backend.acquire({ waitMs: config.waitMs, abort });
      }
      if (lock) return admitHeld(lock);
      const holder = await backend.holder?.();
      if (holder?.stranger) {
        // Even under cron: the job did not run, and someone who does not share it is why.
        say.warn(`${config.name} did not run: its lock (${backend.description}) is held by ${holder.stranger}, who does not share this job; stop that process`);
        await recorder.consult('note who held the lock', (store) => store.recordBlocked(config.name, holder.stranger as string));
      }
      const counted = await recorder.overlap(config.name, holder ? run.host : null, holder?.pid ?? null);
      return { admitted: false, reason: 'locked', holder: counted, reported: holder?.stranger != null };
    },
    roundTrips,
    close: () => recorder.close(),
  };
}

// For -v, once: the lock is held, and this invocation waits for it (-w, or a loop's hand-over).
function waiting(config: RunConfig, lock: string, say: Messages): () => null {
  let said = false;
  return () => {
    if (!said && config.waitMs > 0) say.verbose(`${config.name}: ${lock} is held; waiting up to ${formatDuration(config.waitMs)} for it`);
    said = true;
    return null;
  };
}

// The run as recorded: it started when it got the lock.
function atLock(run: NewRun): NewRun {
  return { ...run, startedAt: new Date() };
}
