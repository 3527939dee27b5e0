import type { RunConfig } from '../../cli/config.js';
import { CronguardError } from '../../errors.js';
import type { Lock } from '../../lock/backend.js';
import { retryUntil } from '../../lock/backend.js';
import { keepsLock } from '../../store/admission.js';
import type { DatabaseLock, LockedAdmission, SharedDatabase, SharedSession } from '../../store/shared.js';
import type { NewRun } from '../../store/types.js';
import type { Messages } from '../../util/io.js';
import { newRunKey } from '../../util/process-id.js';
import { prestartWatchdog } from '../supervisor/watchdog.js';
import { describeSlots, type Entry, type Gate, type GateOptions, type RoundTrips, type Slot, type SlotStamp } from './gate.js';
import { atLock, localGate, waiting } from './local.js';
import type { OpenedLog } from './log-open.js';
import { Outage } from './outage.js';

// A slot of a lock in the fleet's database (lock/slots.ts), and what a run in it records.
export interface DatabaseSlot {
  readonly lock: DatabaseLock;
  readonly stamp: SlotStamp;
}

// One statement takes the lock, applies the fleet rule and records the run. If the log
// fails inside it (no privilege, a timeout), a lock that can be taken alone is, and the
// record spooled; never on a server that refused it as read-only.
export function databaseGate(
  slots: readonly DatabaseSlot[],
  database: SharedDatabase,
  lockSession: SharedSession | null,
  log: OpenedLog,
  run: NewRun,
  config: RunConfig,
  options: GateOptions,
  say: Messages,
  roundTrips: () => RoundTrips,
): Gate {
  const [first] = slots as [DatabaseSlot];
  const combined = log.store;
  // The session is the log's, which a session lock shares; without a log, the lock's own.
  // Without -w a lost session ends the invocation at once.
  const session = combined?.session ?? lockSession;
  const outage = config.waitMs > 0 && session !== null ? new Outage(database, session, log, config.name, say) : null;
  // The run as the next admission records it: a new run key after an admission whose reply
  // was lost, whose row, if the server committed it, its spooled record ends.
  let current = run;
  const fallback: Slot[] = slots.map(({ lock, stamp }) => ({
    backend: lock.alone ? (outage && !combined ? outage.ridingOut(lock.alone.backend) : lock.alone.backend) : { description: lock.description, acquire: async () => null },
    stamp,
  }));
  const gate = localGate(fallback, log.recorder, run, config, options, say, roundTrips);
  const close = async () => {
    await gate.close();
    for (const slot of slots) await slot.lock.close();
  };
  if (!combined) return { ...gate, admit: outage ? outage.bounding(config.waitMs, gate.admit) : gate.admit, close };
  const hold = (dbLock: DatabaseLock, admitted: LockedAdmission, sentAt: number): Lock => {
    const { lock, release, releasedElsewhere } = dbLock.taken(admitted, sentAt);
    log.recorder.releasesLock(release, releasedElsewhere);
    return lock;
  };
  // One slot's admission: an entry, or null when its lock is held and this is not the answer
  // yet (a wait goes on, another slot is tried, or the skip is counted below).
  const attemptSlot = async ({ lock: dbLock, stamp: slot }: DatabaseSlot, countSkip: boolean): Promise<Entry | null> => {
    if (log.recorder.writable) {
      const stamped = atLock({ ...current, ...slot });
      try {
        const admitting = combined.lockAndAdmit(stamped, dbLock.request, options, countSkip);
        // A command under a database lock needs a watchdog: it starts while the server works.
        if (dbLock.spareWatchdog) prestartWatchdog();
        const admitted = await admitting;
        const { admission } = admitted;
        const held = admitted.holding ? hold(dbLock, admitted, admitted.sentAt) : null;
        if (!admission.admitted) {
          if (held && keepsLock(admission, options)) return { ...admission, held, slot };
          return admission.reason !== 'locked' || countSkip ? admission : null;
        }
        log.recorder.adopt(admission.startedAt ? { ...stamped, startedAt: admission.startedAt } : stamped, admission.runId);
        return { admitted: true, lock: held as Lock, slot, requests: admission.requests };
      } catch (error) {
        // A refusal of cronguard's own (a server connection shared by a pooler): nothing ran.
        if (error instanceof CronguardError) throw error;
        // A read-only server is a standby or a replica (one a pooler still passes off as the
        // primary): a lock taken there alone would run the job beside the primary's run.
        const readOnly = database.readOnly(error);
        if (readOnly) throw readOnly;
        // Only an error the server sent is the log's; anything else is the connection, and
        // without it there is no lock (69), though the statement may have committed; a
        // waiter whose session was lost goes on waiting, with a new run key. A statement the
        // server answered with an error (a FATAL that ended the session included: a backend
        // terminated, a pooler whose server is down) did not commit: only one whose answer was
        // lost with the connection leaves a row to end, if there is one (lostAdmission).
        if (combined.connectionLost || !database.isServerError(error) || !dbLock.alone) {
          if (!database.isServerError(error)) log.recorder.lostAdmission(stamped);
          if (!outage?.lost) throw database.error(error);
          outage.lostBy(error);
          current = { ...run, runKey: newRunKey() };
          return null;
        }
        log.recorder.unavailable('record the start', error);
      }
    }
    if (!dbLock.alone) throw database.error(log.recorder.openFailure ?? new Error('the run log is out of reach'));
    const lock = await dbLock.alone.tryOnce();
    return lock && gate.admitHeld(lock, slot);
  };
  // The first slot that is free, in order; the skip is counted by the last slot's admission
  // when nothing waits (null: every slot is held, and nothing counted it). The log counts the
  // minute's starts (at most N) whichever slot asks, so its refusal is the answer.
  const attempt = async (abort: AbortSignal): Promise<Entry | null> => {
    if (outage?.lost && !(await outage.reconnected(abort))) return null;
    for (const [i, slot] of slots.entries()) {
      const entry = await attemptSlot(slot, config.waitMs === 0 && i === slots.length - 1);
      if (entry) return entry;
      // The next slot waits for the next try's reconnection: an admission sent on a lost
      // session never reaches the server.
      if (outage?.lost) return null;
    }
    return null;
  };
  const description = describeSlots(first.lock.description, slots.length);
  const tell = waiting(config, description, say);
  const admit = async (abort: AbortSignal): Promise<Entry> => {
    // Before the admission, as a local lock's gate does: a record of this host's that says
    // its run never started the command (the reply to its admission lost) gives its claims
    // back first, for this admission to serve, rather than the admission ending them failed
    // with the row it abandons.
    await log.recorder.deliverSpool();
    outage?.waitsFor(config.waitMs);
    const entry = await retryUntil(async () => (await attempt(abort)) ?? tell(), config.waitMs, abort).finally(() => outage?.over());
    if (entry) return entry;
    if (outage && outage.failure !== null) throw database.error(outage.failure);
    return { admitted: false, reason: 'locked', holder: await log.recorder.overlap(config.name, null, null) };
  };
  return { ...gate, description, admit, close };
}
