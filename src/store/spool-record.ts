import type { NewRun, RunOutcome, RunStatus } from './types.js';

// A record the log refuses for its content, and will refuse every time: the spool sets it
// aside rather than wait for the next run. Each store tells which of its errors these are.
export class RecordRefused extends Error {}

// A record whose run key, and the key made from it, both name other runs' rows.
export class RunKeyTaken extends RecordRefused {
  constructor(runKey: string) {
    super(`run key ${runKey} belongs to another run`);
  }
}

// A run whose record could not reach PostgreSQL, as JSON. Its run key makes delivery an
// upsert: one row, whether or not its start got through.
export interface SpooledRun {
  // The database and schema it belongs to (see Spool).
  target?: string;
  // The URL's key (hosts, database, schema) it was made through, and the run key of a run the
  // log it belongs to holds (its own, once its start was recorded; else the last one this host
  // recorded through that URL; null: none known): see Spool. Absent from older records.
  from?: string;
  witness?: string | null;
  id: number | null;
  run: Omit<NewRun, 'startedAt' | 'invokedAt' | 'tick'> & { startedAt: string; invokedAt: string; tick: string | null };
  childPid: number | null;
  outcome: StoredOutcome | null;
  // The requests its command was given (absent from records of older versions), and whether
  // its outcome is the invocation's last: see claimsOf (requests.ts).
  served?: number[];
  final?: boolean;
  // A lost admission's record (RunRecorder.lostAdmission): delivered only to a log that holds
  // its run, by a store that can tell (holdsRun); else dropped, as nothing ran.
  onlyIfRecorded?: boolean;
}

// How a spooled run ended, as a store writes it.
export type StoredOutcome = Omit<RunOutcome, 'status' | 'finishedAt' | 'durationMs'> & {
  status: RunStatus;
  finishedAt: string;
  durationMs: number | null;
};

// A spooled run's outcome; one that never reported an end was abandoned by its wrapper.
export function outcomeOf(record: SpooledRun): StoredOutcome {
  return (
    record.outcome ?? {
      status: 'abandoned',
      finishedAt: new Date().toISOString(),
      durationMs: null,
      exitCode: null,
      signal: null,
      output: null,
      outputTruncated: false,
      error: 'wrapper vanished before its run could be recorded',
    }
  );
}

// The run of a spooled record, with its times as dates again.
export function runOf(record: SpooledRun): NewRun {
  const r = record.run;
  return { ...r, startedAt: new Date(r.startedAt), invokedAt: new Date(r.invokedAt), tick: r.tick === null ? null : new Date(r.tick) };
}

// The key a record takes when its own names another run's row (keys made before they had a
// random part collide across PID namespaces): made from the record alone, so that a second
// delivery of it finds the row the first one wrote.
export function rekeyed(record: SpooledRun): string {
  return `${record.run.runKey}@${record.run.host}/${record.run.pid}/${record.run.startedAt}`;
}
