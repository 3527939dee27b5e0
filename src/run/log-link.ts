import { hostname } from 'node:os';
import { describe, UnavailableError } from '../errors.js';
import type { RunStore } from '../store/run-store.js';
import type { RecorderParts, SharedSession, SharedStore } from '../store/shared.js';
import type { Messages } from '../util/io.js';

// The run path's link to its run log, whatever it records. A run log that cannot be written
// must never stop or change the job: the first failure prints one warning, then records go
// to the spool (shared log) or are dropped (embedded log), and the exit code stays the
// command's. RunRecorder records a run through it.
export class LogLink {
  protected store: RunStore | null;
  protected spooling = false;
  private warned = false;
  // Why the log failed, until it is said (see unavailable).
  protected failure: string | null = null;
  // The sessions of the stores opened after the first, for -v's count of round trips: looks
  // for a stop request over them are subtracted from the run's statements like any other.
  readonly reopenedSessions: SharedSession[] = [];

  // Why this run cannot start without its log (--scheduled: whether the job is due is the
  // log's to say); null once the admission answered, or when it can.
  protected needed: string | null;

  constructor(
    protected readonly parts: RecorderParts,
    protected readonly say: Messages,
    needed: string | null = null,
  ) {
    this.needed = needed;
    this.store = parts.store;
    if (parts.store) say.verbose(`run log ${parts.where}`);
    if (parts.openError !== null) this.unavailable('open', parts.openError);
  }

  // Why the log could not be opened at all; null when it was.
  get openFailure(): unknown {
    return this.parts.openError;
  }

  // Whether records still go to the store (not to the spool, or nowhere).

  get writable(): boolean {
    return this.store !== null && !this.spooling;
  }

  // Records spooled earlier. A failure here is the spool's, not this run's: it never sends
  // this run's own records to the spool.
  async deliverSpool(): Promise<void> {
    const { spool } = this.parts;
    if (!spool || !this.store || this.spooling) return;
    try {
      await spool.deliver(this.store, hostname(), this.say);
    } catch (error) {
      this.say.warn(`spooled runs in ${spool.dir} not delivered (${describe(error)})`);
    }
  }

  // A loop between runs whose log lost its connection: a fresh one, and the spool delivered.
  // False while the log stays out of reach (or until `abort`), or cannot be reopened (embedded
  // log), or failed for a reason a new connection would not mend (a missing privilege).
  async reconnect(abort: AbortSignal): Promise<boolean> {
    if (!this.parts.reopen || this.writable || this.store?.connectionLost === false) return false;
    const store = await this.reopened(abort).catch(() => null);
    if (!store) return false;
    await this.store?.close().catch(() => {});
    [this.store, this.spooling] = [store, false];
    this.sayFailure('reconnected');
    this.say.verbose(`run log ${this.parts.where} reachable again`);
    await this.deliverSpool();
    return true;
  }

  // A look beside the run's own statements (StopListener: is a stop asked?) failed because the
  // session was lost (a database restart, a failover, a NAT that dropped it). The run's own
  // statements reopen when they fail (attempt); the looks did not, so every later look failed
  // on the dead session and no `stop` reached the run again. A fresh session, if one comes;
  // else the next look tries again. Nothing is spooled for it: the run's record is untouched.
  async renewLostSession(): Promise<void> {
    const old = this.store;
    if (!this.parts.reopen || !this.writable || old?.connectionLost !== true) return;
    const store = await this.reopened().catch(() => null);
    if (!store) return;
    // The run's own statement may have renewed it meanwhile: that one stays.
    if (this.store !== old) return void (await store.close().catch(() => {}));
    this.store = store;
    await old.close().catch(() => {});
  }

  // A question for the log, or a note, beside the run's own record (is the job paused? who
  // held the lock? requests given back): what `op` answers, or null when the log cannot.
  async consult<T>(what: string, op: (store: RunStore) => Promise<T>): Promise<T | null> {
    let answer: T | null = null;
    await this.attempt(what, async (store) => {
      answer = await op(store);
    });
    return answer;
  }

  // The store while records go to it, for the automatic prune and the metrics textfile.
  get openStore(): RunStore | null {
    return this.writable ? this.store : null;
  }

  async close(): Promise<void> {
    this.sayFailure(`records go to ${this.parts.spool?.dir} until it can be written`);
    const store = this.store;
    this.store = null;
    await store?.close().catch(() => {});
  }

  // The log failed; from now on records go to the spool (or nowhere). Warns once, naming a
  // missing privilege as such, since that is what the operator must grant. With a spool, the
  // one line also says whether the spool took the run's record, so it waits for the first
  // record (or, if none comes, for close()).
  unavailable(what: string, error: unknown): void {
    this.spooling = this.parts.spool !== null;
    if (!this.spooling) void this.close();
    if (this.warned || this.failure !== null) return;
    const why = this.parts.denied?.(error) ? `permission denied: ${(error as Error).message}` : describe(error);
    this.failure = `run log ${this.parts.where} unavailable (${what}: ${why})`;
    if (!this.spooling && this.needed === null) this.sayFailure('the job runs unrecorded');
  }

  // Ends a run that cannot start without its log, when the log did not answer: one line, 69.
  protected requireLog(): void {
    if (this.needed === null) return;
    if (!this.writable) {
      const failure = this.failure ?? `run log ${this.parts.where} unavailable`;
      // Said by this line, not again when the log closes.
      [this.failure, this.warned] = [null, true];
      throw new UnavailableError(`${failure}; ${this.needed}; nothing ran`);
    }
    this.needed = null;
  }

  protected sayFailure(then: string): void {
    if (this.failure === null) return;
    this.say.warn(`${this.failure}; ${then}`);
    this.failure = null;
    this.warned = true;
  }

  private async reopened(abort?: AbortSignal): Promise<SharedStore> {
    const store = await (this.parts.reopen as (abort?: AbortSignal) => Promise<SharedStore>)(abort);
    this.reopenedSessions.push(store.session);
    return store;
  }

  protected async attempt(what: string, op: (store: RunStore) => Promise<void>, retry = false): Promise<void> {
    if (!this.store || this.spooling) return;
    try {
      await op(this.store);
      return;
    } catch (error) {
      if (!(retry && this.parts.reopen)) return this.unavailable(what, error);
    }
    try {
      await this.store.close().catch(() => {});
      this.store = await this.reopened();
      await op(this.store);
    } catch (error) {
      this.unavailable(what, error);
    }
  }
}
