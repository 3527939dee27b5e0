import { describe } from '../errors.js';
import { openStore } from '../store/index.js';
import type { NewRun, RunOutcome, RunStore } from '../store/types.js';
import type { Messages } from '../util/stderr.js';

// The run path's view of the run log. A run log that cannot be written (disk full,
// read-only directory, corrupt file) must never stop or change the job: the first failure
// prints one warning and the rest of the run goes unrecorded.
export class RunRecorder {
  private store: RunStore | null = null;
  private runId: number | null = null;

  private constructor(private readonly say: Messages) {}

  static async open(stateDir: string | null, say: Messages): Promise<RunRecorder> {
    const recorder = new RunRecorder(say);
    if (stateDir === null) return recorder;
    try {
      recorder.store = await openStore(stateDir);
      say.verbose(`run log: ${stateDir}`);
    } catch (error) {
      say.warn(`run log in ${stateDir} unavailable (${describe(error)}); the job runs unrecorded`);
    }
    return recorder;
  }

  async start(run: NewRun, isAlive: (pid: number) => boolean): Promise<void> {
    await this.attempt('record the start', async (store) => {
      this.runId = await store.startRun(run, isAlive);
    });
  }

  async childStarted(childPid: number): Promise<void> {
    await this.attempt('record the child pid', (store) =>
      this.runId === null ? Promise.resolve() : store.setChildPid(this.runId, childPid),
    );
  }

  async finish(outcome: RunOutcome): Promise<void> {
    await this.attempt('record the outcome', (store) =>
      this.runId === null ? Promise.resolve() : store.finishRun(this.runId, outcome),
    );
  }

  async overlap(job: string): Promise<void> {
    await this.attempt('count the skipped run', (store) => store.recordOverlap(job));
  }

  async close(): Promise<void> {
    const store = this.store;
    this.store = null;
    await store?.close().catch(() => {});
  }

  private async attempt(what: string, op: (store: RunStore) => Promise<void>): Promise<void> {
    if (!this.store) return;
    try {
      await op(this.store);
    } catch (error) {
      this.say.warn(`run log failed (${what}: ${describe(error)}); the rest of this run goes unrecorded`);
      await this.close();
    }
  }
}
