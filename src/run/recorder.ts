import { hostname } from 'node:os';
import { describe } from '../errors.js';
import type { Spool, SpooledRun } from '../store/spool.js';
import type { NewRun, RunOutcome, RunStore } from '../store/types.js';
import type { Messages } from '../util/io.js';

export interface RecorderParts {
  readonly store: RunStore | null;
  // Where records go when the store fails; null: they are dropped (embedded store).
  readonly spool: Spool | null;
  // Opens a fresh store after the first one failed (e.g. its connection was lost).
  readonly reopen: (() => Promise<RunStore>) | null;
  // Why the store could not be opened at all, if it could not.
  readonly openError: unknown;
  readonly where: string;
}

// The run path's view of the run log. A run log that cannot be written must never stop or
// change the job: the first failure prints one warning, then the record goes to the spool
// (shared log) or is dropped (embedded log), and the exit code stays the command's.
export class RunRecorder {
  private store: RunStore | null;
  private runId: number | null = null;
  private run: NewRun | null = null;
  private childPid: number | null = null;
  private spooling = false;
  private warned = false;
  private overlapCounted = false;

  constructor(
    private readonly parts: RecorderParts,
    private readonly say: Messages,
  ) {
    this.store = parts.store;
    if (parts.store) say.verbose(`run log ${parts.where}`);
    if (parts.openError !== null) this.fail('open', parts.openError);
  }

  // The run was already recorded by the statement that took the lock.
  adopt(run: NewRun, id: number): void {
    this.run = run;
    this.runId = id;
  }

  // The skip was already counted by the statement that tried the lock.
  overlapAlreadyCounted(): void {
    this.overlapCounted = true;
  }

  async deliverSpool(isAlive: (pid: number) => boolean): Promise<void> {
    const { spool } = this.parts;
    if (!spool || !this.store) return;
    await this.attempt('deliver spooled runs', (store) => spool.deliver(store, isAlive, hostname()).then(() => {}));
  }

  async start(run: NewRun, isAlive: (pid: number) => boolean): Promise<void> {
    if (this.runId !== null) return;
    this.run = run;
    await this.attempt('record the start', async (store) => {
      this.runId = await store.startRun(run, isAlive);
    });
    this.spoolNow(null);
  }

  async childStarted(childPid: number): Promise<void> {
    this.childPid = childPid;
    await this.attempt('record the child pid', (store) =>
      this.runId === null ? Promise.resolve() : store.setChildPid(this.runId, childPid),
    );
    this.spoolNow(null);
  }

  async finish(outcome: RunOutcome): Promise<void> {
    await this.attempt('record the outcome', async (store) => {
      if (this.runId !== null) await store.finishRun(this.runId, outcome);
    }, true);
    this.spoolNow(outcome);
  }

  async overlap(job: string, host: string | null): Promise<void> {
    if (this.overlapCounted) return;
    await this.attempt('count the skipped run', (store) => store.recordOverlap(job, host));
  }

  async close(): Promise<void> {
    const store = this.store;
    this.store = null;
    await store?.close().catch(() => {});
  }

  private async attempt(what: string, op: (store: RunStore) => Promise<void>, retry = false): Promise<void> {
    if (!this.store || this.spooling) return;
    try {
      await op(this.store);
      return;
    } catch (error) {
      if (!(retry && this.parts.reopen)) return this.fail(what, error);
    }
    try {
      await this.store.close().catch(() => {});
      this.store = await this.parts.reopen();
      await op(this.store);
    } catch (error) {
      this.fail(what, error);
    }
  }

  private fail(what: string, error: unknown): void {
    this.spooling = this.parts.spool !== null;
    if (!this.spooling) void this.close();
    if (this.warned) return;
    this.warned = true;
    const then = this.spooling
      ? `records go to ${this.parts.spool?.dir} until it can be reached`
      : 'the job runs unrecorded';
    this.say.warn(`run log ${this.parts.where} unavailable (${what}: ${describe(error)}); ${then}`);
  }

  private spoolNow(outcome: RunOutcome | null): void {
    if (!this.spooling || !this.parts.spool || !this.run) return;
    const record: SpooledRun = {
      id: this.runId,
      run: { ...this.run, startedAt: this.run.startedAt.toISOString() },
      childPid: this.childPid,
      outcome: outcome && { ...outcome, finishedAt: outcome.finishedAt.toISOString() },
    };
    try {
      this.parts.spool.write(record);
    } catch (error) {
      this.say.warn(`cannot write the spool in ${this.parts.spool.dir} (${describe(error)}); this run goes unrecorded`);
      this.spooling = false;
      this.store = null;
    }
  }
}
