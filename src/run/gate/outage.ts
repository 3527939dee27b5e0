import type { Lock, LockBackend } from '../../lock/backend.js';
import { retryUntil } from '../../lock/backend.js';
import type { SharedDatabase, SharedSession } from '../../store/shared.js';
import type { Messages } from '../../util/io.js';
import { monotonicMs } from '../../util/time.js';
import type { Gate } from './gate.js';
import type { OpenedLog } from './log-open.js';

// A waiter (-w) of a lock in the fleet's database holds nothing while it waits: a session lost
// meanwhile (a server restarted) connects again at its next try, and a server still down
// counts as the lock still held until the wait is over; then the invocation ends as a first
// connection's failure does (69), with the last try's failure, else the loss's.
export class Outage {
  // The failure the session was lost with, and the last try's to connect again.
  #lostWith: unknown = null;
  #unreachable: unknown = null;
  // Said once (-v) per outage: whether the last try to connect again failed.
  #said = false;
  #deadline = 0;

  constructor(
    private readonly database: SharedDatabase,
    private readonly session: SharedSession,
    private readonly log: OpenedLog,
    private readonly name: string,
    private readonly say: Messages,
  ) {}

  get lost(): boolean {
    return this.session.connectionLost;
  }

  // The failure the wait ends in when it is over with the server out of reach; null: none.
  get failure(): unknown {
    return this.#unreachable ?? this.#lostWith;
  }

  // A wait of `waitMs` begins: no statement of it outlasts it by more than a live server's
  // answer takes (a pooler's queue in front of a server that is down holds one unanswered).
  waitsFor(waitMs: number): void {
    this.#deadline = monotonicMs() + waitMs;
    this.session.answerBy(this.#deadline);
  }

  // The wait is over: the run's statements from now on are bound by their own timeout only.
  over(): void {
    this.session.answerBy(null);
  }

  // The session was lost with `error`: the next try connects again.
  lostBy(error: unknown): void {
    this.#lostWith = error;
  }

  // The lost session connected again (no later than the wait's end), and the spool delivered:
  // it may hold the record of the run whose holder lost the lock with the restart, and those
  // of this wait's admissions whose answers were lost.
  async reconnected(abort?: AbortSignal): Promise<boolean> {
    const late = AbortSignal.timeout(Math.max(1, Math.ceil(this.#deadline - monotonicMs())));
    try {
      await this.database.reconnect(this.session, abort ? AbortSignal.any([abort, late]) : late);
    } catch (caught) {
      abort?.throwIfAborted();
      // A server that took the connection and never answered before the wait's end (a hung or
      // stopped server): said as a timeout, not as the abort's own words.
      const error = late.aborted ? Object.assign(new Error('no answer before the wait was over'), { code: 'ETIMEDOUT' }) : caught;
      if (!late.aborted || this.#unreachable === null) {
        if (!this.#said) this.say.verbose(`${this.name}: ${this.database.error(error).message}; waiting for it as for the lock`);
        this.#unreachable = error;
      }
      this.#said = true;
      return false;
    }
    if (this.#said) this.say.verbose(`${this.name}: ${this.database.name} reachable again`);
    [this.#unreachable, this.#lostWith, this.#said] = [null, null, false];
    await this.log.recorder.deliverSpool();
    return true;
  }

  // Without a log, the lock is taken alone, as a local one is (localGate): a waiter's session
  // lost at any try, its first included (the server was reached: no first connection's
  // failure), is connected again at its next try, within the wait (bounding).
  ridingOut(backend: LockBackend): LockBackend {
    const once = async (abort?: AbortSignal): Promise<Lock | null> => {
      if (this.lost && !(await this.reconnected(abort))) return null;
      try {
        return await backend.acquire({ waitMs: 0, abort });
      } catch (error) {
        if (!this.lost) throw error;
        this.lostBy(error);
        return null;
      }
    };
    return {
      ...backend,
      acquire: ({ waitMs, abort }) => retryUntil(() => once(abort), waitMs, abort),
      outOfReach: () => (this.failure === null ? null : this.database.error(this.failure)),
    };
  }

  // The admission of a lock taken alone (ridingOut's), bound as a whole by the invocation's
  // wait: its first try, each slot's (--max-running) and the wait's.
  bounding(waitMs: number, admit: Gate['admit']): Gate['admit'] {
    return (abort) => {
      this.waitsFor(waitMs);
      return admit(abort).finally(() => this.over());
    };
  }
}
