import type { Lock, LockBackend } from '../../lock/backend.js';
import type { AdmitOptions, Refused, Verdict } from '../../store/admission.js';
import type { ClaimedRequest } from '../../store/requests.js';
import type { NewRun } from '../../store/types.js';
import type { RunRecorder } from '../recorder.js';

// Whether an invocation may run, and if so the lock it holds, in which slot, and the requests
// it serves. A loop (--for) that found nothing due yet holds the lock (`held`) to wait for work.
export type Entry =
  | { readonly admitted: true; readonly lock: Lock; readonly slot: SlotStamp; readonly requests: readonly ClaimedRequest[] }
  | (Refused & { readonly held?: Lock; readonly slot?: SlotStamp; readonly reported?: boolean });

// What a run in a slot of the job's lock (lock/slots.ts) records of it.
export type SlotStamp = Pick<NewRun, 'slot' | 'lockKey'>;

// One slot of a lock of this host's (or a Redis one): how to take it, and its stamp.
export interface Slot {
  readonly backend: LockBackend;
  readonly stamp: SlotStamp;
}

// For -v: the lock, and how many slots it has.
export function describeSlots(first: string, slots: number): string {
  if (slots === 1) return first;
  return `${first} and its slots #1${slots > 2 ? ` to #${slots - 1}` : ''} (--max-running ${slots})`;
}

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

// A step of admission taken around a gate's own (--replace's stop of the running copy, a
// shared lock's check that the job is due): the lock, the log and the loop's readmission stay
// the gate's.
export abstract class AroundGate implements Gate {
  constructor(protected readonly inner: Gate) {}
  get recorder(): RunRecorder {
    return this.inner.recorder;
  }
  get description(): string {
    return this.inner.description;
  }
  abstract admit(abort: AbortSignal): Promise<Entry>;
  readmit(run: NewRun): Promise<Verdict> {
    return this.inner.readmit(run);
  }
  roundTrips(): RoundTrips {
    return this.inner.roundTrips();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

// The statements of the run, and apart from them, those of the lock's heartbeat.
export interface RoundTrips {
  // The database's name (PostgreSQL, MySQL), for the -v line.
  readonly database: string;
  readonly statements: number;
  readonly heartbeats: number;
}
export const NONE: RoundTrips = { database: '', statements: 0, heartbeats: 0 };

