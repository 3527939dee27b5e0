import { hostname } from 'node:os';
import { describe } from '../errors.js';
import { isPrivilegeError } from '../pg/config.js';
import type { Spool, SpooledRun } from '../store/spool.js';
import type { ClaimedRequest } from '../store/requests.js';
import type { Admission, AdmitOptions, Holder, NewRun, RunOutcome, RunStore } from '../store/types.js';
import type { Messages } from '../util/io.js';

export interface RecorderParts {
  readonly store: RunStore | null;
  // Where records go when the store fails; null: they are dropped (embedded store).
  readonly spool: Spool | null;
  // Opens a fresh store after the first one failed (e.g. its connection was lost); an aborted
  // `abort` gives up connecting.
  readonly reopen: ((abort?: AbortSignal) => Promise<RunStore>) | null;
  // Why the store could not be opened at all, if it could not.
  readonly openError: unknown;
  readonly where: string;
}

// What the log says about one invocation: go ahead (serving these requests), or why not.
export type Verdict = { readonly admitted: true; readonly requests: readonly ClaimedRequest[] } | Refused;
export type Refused = Extract<Admission, { admitted: false }>;

// The run path's view of the run log. A run log that cannot be written must never stop or
// change the job: the first failure prints one warning, then the record goes to the spool
// (shared log) or is dropped (embedded log), and the exit code stays the command's.
export class RunRecorder {
  private store: RunStore | null;
  private id: number | null = null;
  private run: NewRun | null = null;
  private childPid: number | null = null;
  // The requests this attempt's command is given, for its spooled record (see claimsOf).
  private served: readonly number[] = [];
  private spooling = false;
  private warned = false;
  // Why the log failed, until it is said (see unavailable).
  private failure: string | null = null;
  private unlock: { readonly key: bigint; readonly released: () => void } | null = null;

  constructor(
    private readonly parts: RecorderParts,
    private readonly say: Messages,
  ) {
    this.store = parts.store;
    if (parts.store) say.verbose(`run log ${parts.where}`);
    if (parts.openError !== null) this.unavailable('open', parts.openError);
  }

  // Whether records still go to the store (not to the spool, or nowhere).
  get writable(): boolean {
    return this.store !== null && !this.spooling;
  }

  // The run's id in the log; null without a log, or while its record is spooled.
  get runId(): number | null {
    return this.id;
  }

  // The run was already admitted and recorded by the statement that took the lock.
  adopt(run: NewRun, id: number | null): void {
    this.run = run;
    this.id = id;
    this.childPid = null;
    this.served = [];
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

  // Under a lock already held: may this run start, and which requests does it serve? A log
  // that cannot answer says yes, to none.
  async admit(run: NewRun, options: AdmitOptions): Promise<Verdict> {
    this.adopt(run, null);
    let verdict: Verdict = { admitted: true, requests: [] };
    await this.attempt('record the start', async (store) => {
      const admission = await store.admit(run, options);
      if (admission.admitted) {
        this.id = admission.runId;
        verdict = { admitted: true, requests: admission.requests };
      } else verdict = admission;
    });
    if (verdict.admitted) this.spoolNow(null);
    return verdict;
  }

  // The reply to the statement that takes the lock and records the start was lost with its
  // connection; the server may have committed the run's row though nothing ran. The spooled
  // record settles it as not run. A spool that cannot be written goes unsaid (this run ends
  // with its one line, 69): the next run that takes the lock marks the row abandoned.
  lostAdmission(run: NewRun): void {
    const error = 'connection lost before the command started; nothing ran';
    const outcome = { status: 'abandoned', finishedAt: new Date().toISOString(), durationMs: 0, exitCode: null, signal: null, output: null, outputTruncated: false, error } as const;
    try {
      this.parts.spool?.write({ ...spooled(run, null, null), outcome, served: [], final: true });
    } catch {
      // Said above: the row is settled by the next run that takes the lock.
    }
  }

  // The command is about to start for these requests: its record says so from now on.
  serving(ids: readonly number[]): void {
    this.served = ids;
  }

  // The command started, with this command line (requests' arguments included).
  async childStarted(childPid: number, command: string): Promise<void> {
    this.childPid = childPid;
    if (this.run) this.run = { ...this.run, command };
    await this.attempt('record the child pid', (store) => (this.id === null ? Promise.resolve() : store.setChildPid(this.id, childPid, command)));
    this.spoolNow(null);
  }

  // The attempt's outcome; on the last attempt (`final`) its requests end with it. With
  // `release`, the lock goes with it where the store holds it (see releasesLock).
  async finish(outcome: RunOutcome, final: boolean, release = false): Promise<void> {
    await this.attempt('record the outcome', async (store) => {
      if (this.id === null) return;
      const unlock = release && store === this.parts.store ? (this.unlock?.key ?? null) : null;
      if ((await store.finishRun(this.id, outcome, final, unlock)) && unlock !== null) this.unlock?.released();
    }, true);
    this.spoolNow(outcome, final);
  }

  // The lock is an advisory lock of the store's own session, released by the last outcome's
  // statement; `released` tells the lock it has nothing left to do.
  releasesLock(key: bigint, released: () => void): void {
    this.unlock = { key, released };
  }

  // The next attempt of the same run: a row of its own, which the requests follow.
  async retry(run: NewRun): Promise<void> {
    const previous = this.id;
    this.adopt(run, null);
    await this.attempt('record the retry', async (store) => {
      if (previous !== null) this.id = await store.startRetry(previous, run);
    });
    this.spoolNow(null);
  }

  // For a loop waiting for work: whether a request is due (false when the log is out of
  // reach), and a way to be woken the moment one is made (when the store can notify).
  async hasDueRequest(job: string): Promise<boolean> {
    let due = false;
    await this.attempt('look for requests', async (store) => {
      due = await store.hasDueRequest(job);
    });
    return due;
  }

  // A loop between runs whose log lost its connection: a fresh one, and the spool delivered.
  // False while the log stays out of reach (or until `abort`), or cannot be reopened (embedded
  // log), or failed for a reason a new connection would not mend (a missing privilege).
  async reconnect(abort: AbortSignal): Promise<boolean> {
    if (!this.parts.reopen || this.writable || this.store?.connectionLost === false) return false;
    const store = await this.parts.reopen(abort).catch(() => null);
    if (!store) return false;
    await this.store?.close().catch(() => {});
    [this.store, this.spooling] = [store, false];
    this.sayFailure('reconnected');
    this.say.verbose(`run log ${this.parts.where} reachable again`);
    await this.deliverSpool();
    return true;
  }

  async onRequest(job: string, wake: () => void): Promise<boolean> {
    let listening = false;
    await this.attempt('listen for requests', async (store) => {
      if (!store.listenForRequests) return;
      await store.listenForRequests(job, wake);
      listening = true;
    });
    return listening;
  }

  // An attempt that ended before it could start (126/127): one finished row, no lock taken.
  async unstartable(run: NewRun, outcome: RunOutcome): Promise<void> {
    this.adopt(run, null);
    await this.attempt('record the attempt', async (store) => {
      this.id = await store.importRun(spooled(run, null, outcome));
    });
    this.spoolNow(outcome);
  }

  async overlap(job: string, host: string | null, holderPid: number | null): Promise<Holder | null> {
    let holder: Holder | null = null;
    await this.attempt('count the skipped run', async (store) => {
      holder = await store.recordOverlap(job, host, holderPid);
    });
    return holder;
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
    const why = isPrivilegeError(error) ? `permission denied: ${(error as Error).message}` : describe(error);
    this.failure = `run log ${this.parts.where} unavailable (${what}: ${why})`;
    if (!this.spooling) this.sayFailure('the job runs unrecorded');
  }

  private sayFailure(then: string): void {
    if (this.failure === null) return;
    this.say.warn(`${this.failure}; ${then}`);
    this.failure = null;
    this.warned = true;
  }

  private async attempt(what: string, op: (store: RunStore) => Promise<void>, retry = false): Promise<void> {
    if (!this.store || this.spooling) return;
    try {
      await op(this.store);
      return;
    } catch (error) {
      if (!(retry && this.parts.reopen)) return this.unavailable(what, error);
    }
    try {
      await this.store.close().catch(() => {});
      this.store = await this.parts.reopen();
      await op(this.store);
    } catch (error) {
      this.unavailable(what, error);
    }
  }

  private spoolNow(outcome: RunOutcome | null, final = false): void {
    const { spool } = this.parts;
    if (!this.spooling || !spool || !this.run) return;
    try {
      spool.write({ ...spooled(this.run, this.id, outcome, this.childPid), served: [...this.served], final });
      this.sayFailure(`records go to ${spool.dir} until it can be written`);
    } catch (error) {
      const lost = 'this run goes unrecorded';
      if (this.failure !== null) this.sayFailure(`the spool in ${spool.dir} cannot be written either (${describe(error)}); ${lost}`);
      else this.say.warn(`cannot write the spool in ${spool.dir} (${describe(error)}); ${lost}`);
      this.spooling = false;
      this.store = null;
    }
  }
}

function spooled(run: NewRun, id: number | null, outcome: RunOutcome | null, childPid: number | null = null): SpooledRun {
  return {
    id,
    run: { ...run, startedAt: run.startedAt.toISOString(), invokedAt: run.invokedAt.toISOString(), tick: run.tick?.toISOString() ?? null },
    childPid,
    outcome: outcome && { ...outcome, finishedAt: outcome.finishedAt.toISOString() },
  };
}
