import type { RunConfig } from '../cli/config.js';
import { CronguardError } from '../errors.js';
import type { Lock, LockBackend } from '../lock/backend.js';
import { retryUntil } from '../lock/backend.js';
import { openLockBackend } from '../lock/index.js';
import { BUSY_RETRY_MS, type Connection, isServerError, pgError } from '../pg/config.js';
import type { ConnectOptions } from '../pg/connect.js';
import type { PgSession } from '../pg/session.js';
import { connectPostgres, openPostgresStore, openSqliteStore } from '../store/index.js';
import type { PostgresStore } from '../store/postgres.js';
import type { SchemaMemory } from '../store/postgres-base.js';
import { touch, touchedSince, unlinkQuietly } from '../util/stamp.js';
import { join } from 'node:path';
import type { ClaimedRequest } from '../store/requests.js';
import type { AdmitOptions, NewRun, RunStore } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import type { Messages } from '../util/io.js';
import { type Refused, RunRecorder, type Verdict } from './recorder.js';
import { prestartWatchdog } from './watchdog.js';
import { logTarget } from './housekeeping.js';

// Whether an invocation may run, and if so the lock it holds and the requests it serves. A
// loop (--for) that found nothing due yet holds the lock (`held`) to wait for work.
export type Admission =
  | { readonly admitted: true; readonly lock: Lock; readonly requests: readonly ClaimedRequest[] }
  | (Refused & { readonly held?: Lock; readonly reported?: boolean });

export interface Gate {
  readonly recorder: RunRecorder;
  // Which lock this is and where it lives, for --verbose.
  readonly description: string;
  // Takes the lock and records the start, or says why this invocation may not run. An
  // aborted `abort` ends a wait for the lock by throwing its reason.
  admit(abort: AbortSignal): Promise<Admission>;
  // The next run (--every, --for) while the lock is still held: the log's admission alone.
  readmit(run: NewRun): Promise<Verdict>;
  // Round trips to PostgreSQL so far, for --verbose (0 without a database).
  roundTrips(): RoundTrips;
  close(): Promise<void>;
}

export type GateOptions = AdmitOptions;

// The statements of the run, and apart from them, those of the heartbeat (PgSession.watch).
export interface RoundTrips {
  readonly statements: number;
  readonly heartbeats: number;
}
const NONE: RoundTrips = { statements: 0, heartbeats: 0 };

// The run log alone, for an attempt that never takes a lock (126/127).
export async function openRecorder(config: RunConfig, say: Messages): Promise<RunRecorder> {
  if (config.log === 'postgres') return (await postgresLog(config, say, null)).recorder;
  return sqliteLog(config, say);
}

// Puts together the lock and the run log the configuration asks for. An aborted `abort` (a
// signal) ends connecting to PostgreSQL by throwing its reason.
export async function openGate(config: RunConfig, run: NewRun, options: GateOptions, say: Messages, abort: AbortSignal): Promise<Gate> {
  if (config.lock !== 'postgres' && config.log !== 'postgres') {
    const backend = await openLockBackend(config, say);
    return localGate(backend, await sqliteLog(config, say), run, config, options, say, () => NONE);
  }
  const db = config.db as NonNullable<RunConfig['db']>;
  // The lock needs its connection: without it nothing runs (69). The log alone can wait.
  const connecting = config.lock === 'postgres' ? connectPostgres(db, `cronguard:${config.name}`, connectOptions(config, say, abort)) : null;
  // The code that will use the session loads while the connection is made (its failure is
  // the await's below; this catch only keeps it from counting as unhandled meanwhile).
  connecting?.catch(() => {});
  const logged = config.log === 'postgres';
  await Promise.all([connecting && import('../lock/postgres.js'), logged && import('../store/postgres.js'), logged && import('../store/spool.js')]);
  const lockSession = connecting && (await connecting);
  const log = logged ? await postgresLog(config, say, lockSession, abort) : { recorder: await sqliteLog(config, say), store: null };
  const sessions = () => [lockSession, log.store?.session].filter((s, i, all) => s && all.indexOf(s) === i) as PgSession[];
  const roundTrips = () =>
    sessions().reduce((n, s) => ({ statements: n.statements + s.roundTrips, heartbeats: n.heartbeats + s.heartbeats }), NONE);
  if (!lockSession) return localGate(await openLockBackend(config, say), log.recorder, run, config, options, say, roundTrips);
  const { heldOn, postgresBackend } = await import('../lock/postgres.js');
  const key = config.lockKey as bigint;
  const plain = postgresBackend(lockSession, key, say);
  const gate = localGate(plain, log.recorder, run, config, options, say, roundTrips);
  const close = async () => {
    await gate.close();
    await lockSession.close();
  };
  const combined = log.store?.session === lockSession ? log.store : null;
  if (!combined) return { ...gate, close };
  log.recorder.releasesLock(key, () => plain.releasedElsewhere());
  // One statement takes the lock, applies the fleet rule and records the run. If the log
  // fails inside it (no privilege, a timeout), the lock is taken alone and the record spooled.
  const attempt = async (): Promise<Admission | null> => {
    if (log.recorder.writable) {
      const stamped = atLock(run);
      try {
        const admitting = combined.lockAndAdmit(stamped, key, options, config.waitMs === 0);
        // A command under the postgres lock needs a watchdog: it starts while the server works.
        prestartWatchdog();
        const { admission, backend, backendStart, holding } = await admitting;
        if (holding) heldOn(lockSession, key, backend, backendStart);
        if (!admission.admitted) {
          if (keeps(options, admission)) return { ...admission, held: plain.held };
          return admission.reason !== 'locked' || config.waitMs === 0 ? admission : null;
        }
        log.recorder.adopt(stamped, admission.runId);
        return { admitted: true, lock: plain.held, requests: admission.requests };
      } catch (error) {
        // A refusal of cronguard's own (a server connection shared by a pooler): nothing ran.
        if (error instanceof CronguardError) throw error;
        // Only an error the server sent is the log's; anything else is the connection, and
        // without it there is no lock (69), though the statement may have committed.
        if (lockSession.isLost || !isServerError(error)) {
          log.recorder.lostAdmission(stamped);
          throw pgError(error, db.display);
        }
        log.recorder.unavailable('record the start', error);
      }
    }
    const lock = await plain.tryOnce();
    return lock && gate.admitHeld(lock);
  };
  const tell = waiting(config, plain.description, say);
  const admit = async (abort: AbortSignal): Promise<Admission> => {
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
  return { ...gate, admit, close };
}

interface LocalGate extends Gate {
  // After the lock is held: the log's verdict, releasing the lock if it says no.
  admitHeld(lock: Lock): Promise<Admission>;
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
  const admitHeld = async (lock: Lock): Promise<Admission> => {
    await recorder.deliverSpool();
    const verdict = await recorder.admit(atLock(run), options);
    if (verdict.admitted) return { ...verdict, lock };
    if (keeps(options, verdict)) return { ...verdict, held: lock };
    await lock.release();
    return verdict;
  };
  return {
    recorder,
    description: backend.description,
    admitHeld,
    readmit: (next) => recorder.admit(atLock(next), options),
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

// A busy server (no free connection slot) is retried for a few seconds, or for as long as
// -w lets the run wait. A run locks and records on the primary: a standby is refused.
function connectOptions(config: RunConfig, say: Messages, abort?: AbortSignal): ConnectOptions {
  return {
    retryForMs: Math.max(BUSY_RETRY_MS, config.waitMs),
    onRetry: (retry, delayMs, reason) => say.verbose(`${config.name}: PostgreSQL is busy (${reason}); retry ${retry} in ${delayMs}ms`),
    abort,
    primary: true,
  };
}

// How long a reconnection made to record (after the first session was lost) may take, and
// then leave a statement unanswered, before the record goes to the spool. Longer than the
// server's lock_timeout on the log's writes (5 s, migration 0013): a write waiting behind a
// locked table is cancelled by the server first, so it cannot commit after it was spooled.
const RECORD_GIVE_UP_MS = 8000;

// A server as older versions keyed its spool: host:port, the host as written.
function serverKey(conn: Connection): string {
  return `${conn.host}:${conn.port}`;
}

// A loop keeps the lock while nothing is due yet, and waits for work.
function keeps(options: AdmitOptions, refusal: Refused): boolean {
  return options.keepLock && (refusal.reason === 'idle' || refusal.reason === 'interval');
}

// The run as recorded: it started when it got the lock.
function atLock(run: NewRun): NewRun {
  return { ...run, startedAt: new Date() };
}

async function sqliteLog(config: RunConfig, say: Messages): Promise<RunRecorder> {
  let store: RunStore | null = null;
  let openError: unknown = null;
  if (config.log === 'sqlite') {
    try {
      store = await openSqliteStore(config.stateDir);
    } catch (error) {
      openError = error;
    }
  }
  return new RunRecorder({ store, spool: null, reopen: null, openError, where: `in ${config.stateDir}` }, say);
}

// The shared log, on the lock's session when there is one. Records that cannot reach it
// go to the spool in the state dir. A signal stops its first connection (the run has not
// begun), never a reconnection to record an outcome.
async function postgresLog(
  config: RunConfig,
  say: Messages,
  session: PgSession | null,
  abort?: AbortSignal,
): Promise<{ recorder: RunRecorder; store: PostgresStore | null }> {
  const db = config.db as NonNullable<RunConfig['db']>;
  const { Spool } = await import('../store/spool.js');
  const connect = (signal?: AbortSignal) => connectPostgres(db, `cronguard:${config.name}`, connectOptions(config, say, signal));
  // The database and schema, whoever connects to them: a record one role spooled is
  // delivered by the next run that may write. See Spool for the keys.
  const scope = `${db.connection.database}/${db.schema}`;
  const memory = schemaMemory(config, (await import('../store/postgres-migrations.js')).POSTGRES_MIGRATIONS.length);
  const spool = new Spool(config.stateDir, `${db.servers.map((s) => serverKey(s.connection)).join(',')}/${scope}`, scope);
  // A store on the server a session reached: its directory (and, once known, its
  // identity's) is the spool's too.
  const opened = async (reached: PgSession): Promise<PostgresStore> => {
    const store = await openPostgresStore(reached, db.schema, true, memory);
    spool.reached(`${serverKey(reached.db.connection)}/${scope}`);
    store.onIdentity = (identity) => spool.identify(identity);
    return store;
  };
  let store: PostgresStore | null = null;
  let openError: unknown = null;
  try {
    store = await opened(session ?? (await connect(abort)));
  } catch (error) {
    if (abort?.aborted) throw error;
    openError = error;
  }
  const recorder = new RunRecorder(
    {
      store,
      spool,
      // After the first session was lost, a record gives up within seconds and goes to the
      // spool, rather than waiting out a connect timeout or the 30 s a statement may take
      // (a pooler that accepted the connection but has no server behind it answers nothing).
      reopen: async (signal) => {
        const limit = AbortSignal.timeout(RECORD_GIVE_UP_MS);
        const reopened = await connect(signal ? AbortSignal.any([signal, limit]) : limit).catch((error) => {
          throw limit.aborted && !signal?.aborted ? new Error(`no session within ${RECORD_GIVE_UP_MS / 1000} s`) : error;
        });
        reopened.answerWithin(RECORD_GIVE_UP_MS);
        return opened(reopened);
      },
      openError,
      where: `${store?.session.db.display ?? db.display} (schema ${db.schema})`,
    },
    say,
  );
  return { recorder, store };
}

// The schema stamp: a file in the state dir whose name carries the schema version this code
// needs, touched once this host found the schema at it. An upgraded cronguard asks again.
function schemaMemory(config: RunConfig, version: number): SchemaMemory {
  const file = join(config.stateDir, `schema-${logTarget(config)}-v${version}.stamp`);
  return {
    current: touchedSince(file, 0),
    remember: () => touch(config.stateDir, file, Date.now()),
    forget: () => unlinkQuietly(file),
  };
}
