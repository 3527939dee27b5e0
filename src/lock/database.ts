import type { LockedAdmission } from '../store/shared.js';
import type { LockRelease, LockRequest } from '../store/types.js';
import type { Lock, LockBackend } from './backend.js';

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
