import type { RunConfig } from '../../cli/config.js';
import { openLockBackend } from '../../lock/index.js';
import { dialectOf } from '../../store/dialects.js';
import { databaseOf } from '../../store/log-spec.js';
import type { SharedSession } from '../../store/shared.js';
import type { NewRun } from '../../store/types.js';
import type { Messages } from '../../util/io.js';
import type { RunRecorder } from '../recorder.js';
import { type Gate, type GateOptions, NONE } from './gate.js';
import { localGate } from './local.js';
import { type OpenedLog, sharedLog, sqliteLog } from './log-open.js';
import { databaseGate } from './statement.js';

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
