import type { RunConfig } from '../../cli/config.js';
import { openLockBackend } from '../../lock/index.js';
import { type LockKind, type LockSpec, recordedKey } from '../../lock/lock-spec.js';
import { slotLocks } from '../../lock/slots.js';
import type { DatabaseConfig } from '../../store/database-config.js';
import { fleetDatabase } from '../../store/fleet-database.js';
import type { DatabaseLock, SharedDatabase, SharedSession } from '../../store/shared.js';
import type { NewRun } from '../../store/types.js';
import type { Messages } from '../../util/io.js';
import type { RunRecorder } from '../recorder.js';
import { type Gate, type GateOptions, NONE, type RoundTrips, type SlotStamp } from './gate.js';
import { localGate } from './local.js';
import { type OpenedLog, openLog } from './log-open.js';

// The run log alone, for an attempt that never takes a lock (126/127).
export async function openRecorder(config: RunConfig, say: Messages): Promise<RunRecorder> {
  return (await openLog(config, say, { database: null, session: null })).recorder;
}

type Opener<K extends LockKind> = (config: RunConfig, locks: readonly Extract<LockSpec<DatabaseConfig>, { kind: K }>[], run: NewRun, options: GateOptions, say: Messages, abort: AbortSignal) => Promise<Gate>;

// The gate of each kind of lock: one of this host's (or none), or a Redis key (its client
// loaded only then), is taken first and the log asked after; one in the fleet's database is
// taken by the log's admission statement, on a session of its own (the advisory lock,
// GET_LOCK) or in the log itself (a lease).
const GATES: { readonly [K in LockKind]: Opener<K> } = {
  flock: localLockGate,
  lockfile: localLockGate,
  none: localLockGate,
  advisory: sessionLockGate,
  named: sessionLockGate,
  lease: leaseGate,
  redis: redisGate,
};

// Puts together the lock (each of its slots, --max-running) and the run log the
// configuration asks for. An aborted `abort` (a signal) ends connecting to the database by
// throwing its reason.
export function openGate(config: RunConfig, run: NewRun, options: GateOptions, say: Messages, abort: AbortSignal): Promise<Gate> {
  // The table's entry for this kind takes this kind's spec; TypeScript cannot pair the two.
  return (GATES[config.lock.kind] as Opener<LockKind>)(config, slotLocks(config.lock, config.maxRunning), run, options, say, abort);
}

// The lock's directory is made ready before the log is opened: a lock that cannot be had
// ends the invocation before it connects to anything (73, 77).
async function localLockGate(config: RunConfig, locks: readonly LockSpec[], run: NewRun, options: GateOptions, say: Messages, abort: AbortSignal): Promise<Gate> {
  const slots = [];
  for (const [slot, lock] of locks.entries()) slots.push({ backend: await openLockBackend(lock, say), stamp: stampOf(lock, slot) });
  const log = await openLog(config, say, { database: null, session: null, abort });
  return localGate(slots, log.recorder, run, config, options, say, counted(null, log));
}

async function redisGate(config: RunConfig, locks: readonly Extract<LockSpec, { kind: 'redis' }>[], run: NewRun, options: GateOptions, say: Messages, abort: AbortSignal): Promise<Gate> {
  const { redisLockBackend } = await import('../../lock/redis/lock.js');
  const log = await openLog(config, say, { database: null, session: null, abort });
  const slots = locks.map((lock, slot) => ({ backend: redisLockBackend(lock, config.name, say, config.waitMs > 0), stamp: stampOf(lock, slot) }));
  return localGate(slots, log.recorder, run, config, options, say, counted(null, log));
}

async function sessionLockGate(config: RunConfig, locks: readonly Extract<LockSpec<DatabaseConfig>, { kind: 'advisory' | 'named' }>[], run: NewRun, options: GateOptions, say: Messages, abort: AbortSignal): Promise<Gate> {
  const [first] = locks as [(typeof locks)[number]];
  const database = await fleetDatabase(config, first.db, say);
  // Without the lock's session nothing runs (69). The log alone can wait.
  const session = await database.connectLock(abort);
  const log = await openLog(config, say, { database, session, abort });
  const slots = [];
  for (const [slot, lock] of locks.entries()) slots.push({ lock: await database.sessionLock(session, lock), stamp: stampOf(lock, slot) });
  return statementGate(slots, database, session, log, config, run, options, say);
}

async function leaseGate(config: RunConfig, locks: readonly Extract<LockSpec<DatabaseConfig>, { kind: 'lease' }>[], run: NewRun, options: GateOptions, say: Messages, abort: AbortSignal): Promise<Gate> {
  const [first] = locks as [(typeof locks)[number]];
  const database = await fleetDatabase(config, first.db, say);
  const log = await openLog(config, say, { database, session: null, abort });
  const slots = [];
  for (const [slot, lock] of locks.entries()) slots.push({ lock: await database.leaseLock(log.store, log.recorder.openFailure, lock), stamp: stampOf(lock, slot) });
  return statementGate(slots, database, null, log, config, run, options, say);
}

function stampOf(lock: LockSpec, slot: number): SlotStamp {
  return { slot, lockKey: recordedKey(lock) };
}

// Loaded with a database's lock only.
async function statementGate(slots: readonly { lock: DatabaseLock; stamp: SlotStamp }[], database: SharedDatabase, session: SharedSession | null, log: OpenedLog, config: RunConfig, run: NewRun, options: GateOptions, say: Messages): Promise<Gate> {
  return (await import('./statement.js')).databaseGate(slots, database, session, log, run, config, options, say, counted(session, log));
}

// The round trips of every session the run used: the lock's, the log's, and those the log
// reopened after losing one.
function counted(lockSession: SharedSession | null, log: OpenedLog): () => RoundTrips {
  const database = log.database;
  if (!database) return () => NONE;
  const sessions = () => [lockSession, log.store?.session, ...log.recorder.reopenedSessions].filter((s, i, all) => s && all.indexOf(s) === i) as SharedSession[];
  return () => sessions().reduce((n, s) => ({ database: n.database, statements: n.statements + s.roundTrips, heartbeats: n.heartbeats + s.heartbeats }), { ...NONE, database: database.name });
}
