import { closeSync, constants, fsyncSync, linkSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe } from '../errors.js';
import type { Messages } from '../util/io.js';
import { isSameProcess, processStart } from '../util/process-id.js';
import { checkPrivateDirectory, openRegular, preparePrivateDirectory } from '../util/safe-path.js';
import { moveAsideUnlessRoots, ownSubdir } from '../util/sharing.js';
import type { NewRun, RunOutcome, RunStatus, RunStore } from './types.js';

// A run whose record could not reach PostgreSQL, as JSON. Its run key makes delivery an
// upsert: one row, whether or not its start got through.
export interface SpooledRun {
  // The database and schema it belongs to (see Spool).
  target?: string;
  id: number | null;
  run: Omit<NewRun, 'startedAt' | 'invokedAt' | 'tick'> & { startedAt: string; invokedAt: string; tick: string | null };
  childPid: number | null;
  outcome: StoredOutcome | null;
  // The requests its command was given (absent from records of older versions), and whether
  // its outcome is the invocation's last: see claimsOf (requests.ts).
  served?: number[];
  final?: boolean;
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

// A record whose run key, and the key made from it, both name other runs' rows.
export class RunKeyTaken extends Error {
  constructor(runKey: string) {
    super(`run key ${runKey} belongs to another run`);
  }
}

// Run records kept on local disk while the shared run log is unreachable, one JSON file per
// run, delivered by the next invocation that can connect. Nothing is lost: a file is removed
// only after its row is in the database. Each database and schema has a directory of its
// own, so a record is never delivered into another schema.
export class Spool {
  readonly dir: string;

  constructor(
    private readonly stateDir: string,
    private readonly target: string,
  ) {
    this.dir = join(ownSubdir(stateDir, 'spool'), fnv1a(target));
  }

  // Written in full and flushed to disk before it takes its name: a full disk or a crash
  // leaves the previous record of the run (or none), never a truncated one.
  write(record: SpooledRun): void {
    // The state directory is checked before anything is made in it.
    const shared = preparePrivateDirectory(this.stateDir, 'state directory') !== null;
    this.checked(true, shared);
    const file = join(this.dir, `${record.run.runKey.replace(/[^A-Za-z0-9._-]/g, '_')}.json`);
    const temp = `${file}.tmp`;
    rmSync(temp, { force: true });
    const fd = openRegular(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 'spool file', temp, 0o600);
    try {
      const bytes = Buffer.from(JSON.stringify({ ...record, target: this.target }));
      for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done);
      fsyncSync(fd);
    } catch (error) {
      rmSync(temp, { force: true });
      throw error;
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  }

  // The spool's directories, made level by level (`create`) and each checked as ours before
  // the next is made or anything is read or renamed in it: in root's shared state directory
  // a member could have made `spool` first, or left a link in its place (root moves such a
  // thing aside there, see moveAsideUnlessRoots; anywhere else it is refused).
  private checked(create: boolean, shared = false): void {
    for (const dir of [dirname(this.dir), this.dir]) {
      if (create) {
        if (shared) moveAsideUnlessRoots(dir);
        mkdirOnce(dir);
      }
      checkPrivateDirectory(dir, 'spool directory');
    }
  }

  // Moves every finished (or orphaned) record into the store. A record is claimed by
  // renaming it to a name that says who delivers it, so two invocations delivering at once
  // never both take it, and one whose deliverer died before it was done is taken again. A
  // record that can never be delivered (unreadable, or refused by the database for what it
  // holds) is set aside for the operator with one warning; when the store itself fails, the
  // record waits for the next delivery, and the run goes on to find out for itself.
  async deliver(store: RunStore, host: string, say: Messages): Promise<number> {
    let names: string[];
    try {
      this.checked(false);
      names = readdirSync(this.dir);
    } catch {
      return 0;
    }
    const me = `.delivering-${process.pid}-${(processStart(process.pid) ?? 'unknown').replace('/', '_')}`;
    let delivered = 0;
    for (const name of names) {
      const base = /^(.*\.json)(?:\.delivering-(\d+)-(.+))?$/.exec(name);
      if (!base || (base[2] !== undefined && isSameProcess(Number(base[2]), (base[3] as string).replace('_', '/')))) continue;
      const original = join(this.dir, base[1] as string);
      const claimed = `${original}${me}`;
      try {
        renameSync(join(this.dir, name), claimed);
      } catch {
        continue;
      }
      const record = readRecord(claimed);
      if (record === null) {
        setAside(claimed, original, 'not a readable run record', say);
        continue;
      }
      const unfinishedHere = !record.outcome && record.run.host === host && isSameProcess(record.run.pid, record.run.wrapperStart);
      if (record.target !== this.target || unfinishedHere) {
        putBack(claimed, original);
        continue;
      }
      try {
        await store.importRun(record);
      } catch (error) {
        if (isRecordError(error)) {
          setAside(claimed, original, `refused: ${describe(error)}`, say);
          continue;
        }
        putBack(claimed, original);
        say.verbose(`spooled runs in ${this.dir} wait for the next run (${describe(error)})`);
        return delivered;
      }
      rmSync(claimed);
      delivered++;
    }
    return delivered;
  }
}

function mkdirOnce(dir: string): void {
  try {
    mkdirSync(dir, 0o700);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

// A spooled record, or null when the file does not hold one (empty or cut short by a crash
// or a full disk before writes were flushed, or edited by hand).
function readRecord(path: string): SpooledRun | null {
  let record: SpooledRun;
  try {
    const fd = openRegular(path, constants.O_RDONLY, 'spool file');
    try {
      record = JSON.parse(readFileSync(fd, 'utf8')) as SpooledRun;
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
  const run = record?.run;
  const valid =
    typeof run?.runKey === 'string' && typeof run.job === 'string' && typeof run.host === 'string' && Number.isInteger(run.pid) &&
    !Number.isNaN(Date.parse(run.startedAt)) && !Number.isNaN(Date.parse(run.invokedAt)) &&
    (record.outcome === null || !Number.isNaN(Date.parse(record.outcome?.finishedAt)));
  return valid ? record : null;
}

// What the database refuses for a record's content (SQLSTATE class 22, data exception, or
// 23, integrity constraint) it will refuse every time.
function isRecordError(error: unknown): boolean {
  return error instanceof RunKeyTaken || /^2[23]/.test(String((error as { code?: unknown })?.code));
}

// Puts a claimed record back under its name, unless its wrapper wrote a newer one there
// meanwhile: rename(2) would replace that. Ours then stays beside it under a name of its
// own, and the log keeps what the newer says whichever is delivered first (see importRun).
function putBack(claimed: string, original: string): void {
  try {
    linkSync(claimed, original);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    renameSync(claimed, `${original.slice(0, -'.json'.length)}.${process.pid}-${Date.now()}.json`);
    return;
  }
  unlinkSync(claimed);
}

// Kept for the operator under a name no deliverer picks up again, and said once.
function setAside(claimed: string, original: string, why: string, say: Messages): void {
  const aside = `${original}.bad-${Date.now()}-${process.pid}`;
  renameSync(claimed, aside);
  say.warn(`spooled run record ${original} cannot be delivered (${why}); moved aside to ${aside}`);
}

// A short, stable directory name for a database and schema (FNV-1a, 32 bits): no crypto on
// the run path for it.
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, '0');
}
