import { describe } from '../errors.js';
import type { AdmitOptions, Holder, Verdict } from '../store/admission.js';
import type { SpooledRun } from '../store/spool-record.js';
import type { LockRelease, NewRun, RunOutcome } from '../store/types.js';
import { LogLink } from './log-link.js';
import type { Notifier } from './report/notify.js';

// The run path's record of one invocation: its admission, its attempts and their outcomes,
// in the log while it can be written, in the spool when it cannot (see LogLink).
export class RunRecorder extends LogLink {
  private id: number | null = null;
  private run: NewRun | null = null;
  private childPid: number | null = null;
  // The requests this attempt's command is given, for its spooled record (see claimsOf).
  private served: readonly number[] = [];
  private unlock: { readonly lock: LockRelease; readonly released: () => void } | null = null;
  // --notify, --notify-url: hears each invocation's final outcome once it is recorded.
  private notifier: Notifier | null = null;

  // The run's id in the log; null without a log, or while its record is spooled.
  get runId(): number | null {
    return this.id;
  }

  // The run was already admitted and recorded by the statement that took the lock.
  adopt(run: NewRun, id: number | null): void {
    this.needed = null;
    this.begin(run, id);
    if (id !== null) this.parts.spool?.witnessed(run.runKey);
  }

  private begin(run: NewRun, id: number | null): void {
    this.run = run;
    this.id = id;
    this.childPid = null;
    this.served = [];
  }

  // Under a lock already held: may this run start, and which requests does it serve? A log
  // that cannot answer says yes, to none; but a run that needs its answer (--scheduled) ends
  // there (requireLog).
  async admit(run: NewRun, options: AdmitOptions): Promise<Verdict> {
    this.begin(run, null);
    let verdict: Verdict = { admitted: true, requests: [] };
    await this.attempt('record the start', async (store) => {
      const admission = await store.admit(run, options);
      if (admission.admitted) {
        this.id = admission.runId;
        if (admission.startedAt) this.run = { ...run, startedAt: admission.startedAt };
        this.parts.spool?.witnessed(run.runKey);
        verdict = { admitted: true, requests: admission.requests };
      } else verdict = admission;
    });
    this.requireLog();
    if (verdict.admitted) this.spoolNow(null);
    return verdict;
  }

  // The reply to the statement that takes the lock and records the start was lost with its
  // connection; the server may have committed the run's row though nothing ran, or never
  // seen the statement (a pooler's queue). The spooled record ends that row as not run, where
  // the log holds it, and is dropped where it does not. A spool that cannot be written goes
  // unsaid (this run ends with its one line, 69): the next run that takes the lock marks the
  // row abandoned.
  lostAdmission(run: NewRun): void {
    const error = 'connection lost before the command started; nothing ran';
    const outcome = { status: 'abandoned', finishedAt: new Date().toISOString(), durationMs: 0, exitCode: null, signal: null, output: null, outputTruncated: false, error } as const;
    try {
      this.parts.spool?.write({ ...spooled(run, null, null), outcome, served: [], final: true, onlyIfRecorded: true });
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

  // The attempt's outcome; on the last attempt (`final`) its requests end with it, and its
  // notifiers hear of it. With `release`, the lock goes with it where the store holds it
  // (see releasesLock).
  async finish(outcome: RunOutcome, final: boolean, release = false): Promise<void> {
    await this.attempt('record the outcome', async (store) => {
      if (this.id === null) return;
      const unlock = release && store === this.parts.store ? (this.unlock?.lock ?? null) : null;
      if ((await store.finishRun(this.id, outcome, final, unlock)) && unlock !== null) this.unlock?.released();
    }, true);
    this.spoolNow(outcome, final);
    if (final) await this.notifier?.ended(this, this.id, outcome);
  }

  // The invocation's notifiers (loaded only when configured), for the runs it records.
  notifyWith(notifier: Notifier | null): void {
    this.notifier = notifier;
  }

  // The lock lives in the store's database (an advisory lock of its session, a lease), and
  // the last outcome's statement releases it; `released` tells the lock it has nothing left to do.
  releasesLock(lock: LockRelease, released: () => void): void {
    this.unlock = { lock, released };
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
