import type { RunConfig } from '../../cli/config.js';
import { type LocalHolder, type Lock, retryUntil } from '../../lock/backend.js';
import { keepsLock } from '../../store/admission.js';
import type { NewRun } from '../../store/types.js';
import { formatDuration } from '../../util/duration.js';
import type { Messages } from '../../util/io.js';
import type { RunRecorder } from '../recorder.js';
import { describeSlots, type Entry, type Gate, type GateOptions, type RoundTrips, type Slot, type SlotStamp } from './gate.js';

// A slot's lock, held.
interface Taken {
  readonly lock: Lock;
  readonly slot: SlotStamp;
}

interface LocalGate extends Gate {
  // After the lock of a slot is held: the log's verdict, releasing the lock if it says no.
  admitHeld(lock: Lock, slot: SlotStamp): Promise<Entry>;
}

// A lock taken first, then the log asked (flock, lockfile, none, redis; the postgres lock
// when the log is elsewhere or failed): the first free of the job's slots (--max-running).
export function localGate(
  slots: readonly Slot[],
  recorder: RunRecorder,
  run: NewRun,
  config: RunConfig,
  options: GateOptions,
  say: Messages,
  roundTrips: () => RoundTrips,
): LocalGate {
  const admitHeld = async (lock: Lock, slot: SlotStamp): Promise<Entry> => {
    await recorder.deliverSpool();
    const verdict = await recorder.admit(atLock({ ...run, ...slot }), options);
    if (verdict.admitted) return { ...verdict, lock, slot };
    if (keepsLock(verdict, options)) return { ...verdict, held: lock, slot };
    await lock.release();
    return verdict;
  };
  const [first] = slots as [Slot];
  const description = describeSlots(first.backend.description, slots.length);
  // One slot waits as its backend does; several are tried in turn, from slot `from` on,
  // until one is free.
  const take = async (waitMs: number, abort: AbortSignal, from = 0): Promise<Taken | null> => {
    if (slots.length === 1) {
      const lock = from === 0 ? await first.backend.acquire({ waitMs, abort }) : null;
      return lock && { lock, slot: first.stamp };
    }
    const each = async () => {
      for (const { backend, stamp } of slots.slice(from)) {
        const lock = await backend.acquire({ waitMs: 0, abort });
        if (lock) return { lock, slot: stamp };
      }
      return null;
    };
    return waitMs === 0 ? each() : retryUntil(each, waitMs, abort);
  };
  // A lock that keeps the fleet's rule (see tickOf) keeps a tick per slot, at most N starts a
  // minute, one in each: a slot whose minute another host has is let go and the free slots
  // after it tried, or whether this invocation runs would hang on which slot happened to be
  // free when it came. A log that keeps the rule counts the minute's starts itself.
  const admitFrom = async (taken: Taken, abort: AbortSignal): Promise<Entry> => {
    let tick: Entry | null = null;
    for (let next: Taken | null = taken; next; next = await take(0, abort, next.slot.slot + 1)) {
      const claimed = await tickOf(next.lock, run, options);
      if (!claimed) return admitHeld(next.lock, next.slot);
      tick ??= claimed;
    }
    return tick as Entry;
  };
  // A loop's later admissions: a stored schedule is due at its time, not cron's jitter early;
  // the loop spaces its runs itself.
  const inLoop = { ...options, spacingMs: null, scheduled: options.scheduled?.inLoop() ?? null };
  return {
    recorder,
    description,
    admitHeld,
    readmit: (next) => recorder.admit(atLock(next), inLoop),
    admit: async (abort) => {
      let taken = await take(0, abort);
      if (!taken && config.waitMs > 0) {
        waiting(config, description, say)();
        taken = await take(config.waitMs, abort);
      }
      if (taken) return admitFrom(taken, abort);
      for (const { backend } of slots) {
        const failure = backend.outOfReach?.();
        if (failure) throw failure;
      }
      const holder = await first.backend.holder?.();
      const strange = await strangerIn(slots, holder);
      if (strange) {
        // Even under cron: the job did not run, and someone who does not share it is why.
        say.warn(`${config.name} did not run: its lock (${strange.description}) is held by ${strange.stranger}, who does not share this job; stop that process`);
        await recorder.consult('note who held the lock', (store) => store.recordBlocked(config.name, strange.stranger));
      }
      const counted = await recorder.overlap(config.name, holder ? run.host : null, holder?.pid ?? null);
      return { admitted: false, reason: 'locked', holder: counted, reported: strange !== null };
    },
    roundTrips,
    close: () => recorder.close(),
  };
}

// The first slot held by someone who does not share the job (slot 0's holder `first`, already
// asked): one in any slot keeps a copy from running as much as one in slot 0.
async function strangerIn(slots: readonly Slot[], first: LocalHolder | undefined): Promise<{ description: string; stranger: string } | null> {
  for (const [i, { backend }] of slots.entries()) {
    const stranger = (i === 0 ? first : await backend.holder?.())?.stranger;
    if (stranger) return { description: backend.description, stranger };
  }
  return null;
}

// The fleet rule, where the lock keeps it (see Lock.claimTick): the minute claimed before the
// log is asked, or the lock released and the invocation skipped for the host that has it.
async function tickOf(lock: Lock, run: NewRun, options: GateOptions): Promise<Entry | null> {
  if (!lock.claimTick || !options.oneRunPerTick || run.tick === null) return null;
  let other: string | null;
  try {
    other = await lock.claimTick(run.tick);
  } catch (error) {
    await lock.release();
    throw error;
  }
  if (other === null) return null;
  await lock.release();
  return { admitted: false, reason: 'tick', holder: { runId: null, host: other, pid: null, startedAt: null } };
}

// For -v, once: the lock is held, and this invocation waits for it (-w, or a loop's hand-over).
export function waiting(config: RunConfig, lock: string, say: Messages): () => null {
  let said = false;
  return () => {
    if (!said && config.waitMs > 0) say.verbose(`${config.name}: ${lock} is held; waiting up to ${formatDuration(config.waitMs)} for it`);
    said = true;
    return null;
  };
}

// The run as recorded: it started when it got the lock.
export function atLock(run: NewRun): NewRun {
  return { ...run, startedAt: new Date() };
}
