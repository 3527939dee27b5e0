import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mkdirp } from '../util/io.js';
import type { NewRun, RunOutcome, RunStore } from './types.js';

// A run whose record could not reach PostgreSQL. `id` is set when its start did get there.
export interface SpooledRun {
  id: number | null;
  run: Omit<NewRun, 'startedAt' | 'tick'> & { startedAt: string; tick: string | null };
  childPid: number | null;
  outcome: (Omit<RunOutcome, 'finishedAt'> & { finishedAt: string }) | null;
}

// Run records kept on local disk while the shared run log is unreachable, one JSON file per
// run, delivered by the next invocation that can connect. Nothing is lost: a file is
// removed only after its row is in the database.
export class Spool {
  readonly dir: string;
  private file: string | null = null;

  constructor(stateDir: string) {
    this.dir = join(stateDir, 'spool');
  }

  write(record: SpooledRun): void {
    mkdirp(this.dir, 0o700);
    this.file ??= join(this.dir, `${Date.parse(record.run.startedAt)}-${record.run.pid}.json`);
    const temp = `${this.file}.tmp`;
    writeFileSync(temp, JSON.stringify(record), { mode: 0o600 });
    renameSync(temp, this.file);
  }

  // Moves every finished (or orphaned) record into the store. A record is claimed by
  // renaming it first, so two invocations delivering at once never insert it twice.
  async deliver(store: RunStore, isAlive: (pid: number) => boolean, host: string): Promise<number> {
    let names: string[];
    try {
      names = readdirSync(this.dir).filter((n) => n.endsWith('.json'));
    } catch {
      return 0;
    }
    let delivered = 0;
    for (const name of names) {
      const path = join(this.dir, name);
      const claimed = `${path}.delivering-${process.pid}`;
      try {
        renameSync(path, claimed);
      } catch {
        continue;
      }
      const record = JSON.parse(readFileSync(claimed, 'utf8')) as SpooledRun;
      if (!record.outcome && record.run.host === host && isAlive(record.run.pid)) {
        renameSync(claimed, path);
        continue;
      }
      try {
        await store.importRun(record);
      } catch (error) {
        renameSync(claimed, path);
        throw error;
      }
      rmSync(claimed);
      delivered++;
    }
    return delivered;
  }
}
