import { closeSync, constants, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe } from '../errors.js';
import type { Messages } from '../util/io.js';
import { isSameProcess, processStart } from '../util/process-id.js';
import { checkPrivateDirectory, openRegular } from '../util/safe-path.js';
import { moveAsideUnlessRoots } from '../util/sharing.js';
import type { RunStore } from './run-store.js';
import { RecordRefused, type SpooledRun } from './spool-record.js';

// The files of the spool (see Spool): its directories, and the delivery of one of them.


// The spool's directories, made level by level (`create`) and each checked as ours before
// the next is made or anything is read or renamed in it: in root's shared state directory
// a member could have made `spool` first, or left a link in its place (root moves such a
// thing aside there, see moveAsideUnlessRoots; anywhere else it is refused).
export function checked(dir: string, create: boolean, shared = false): void {
  for (const level of [dirname(dir), dir]) {
    if (create) {
      if (shared) moveAsideUnlessRoots(level);
      mkdirOnce(level);
    }
    checkPrivateDirectory(level, 'spool directory');
  }
}

// Whether a directory holds records to deliver.
export function waiting(dir: string): boolean {
  try {
    return readdirSync(dir).some((name) => /\.json(?:\.delivering-.*)?$/.test(name));
  } catch {
    return false;
  }
}

// Moves every finished (or orphaned) record of one directory (spooled under `key`) into the
// store. A record is claimed by renaming it to a name that says who delivers it, so two
// invocations delivering at once never both take it, and one whose deliverer died before it
// was done is taken again. `vouch`, when given, says whether a record belongs in this store
// (see Spool); one it refuses waits. A record that can never be delivered (unreadable, or refused by
// the database for what it holds) is set aside for the operator with one warning; when the
// store itself fails, the record waits for the next delivery (`complete` false), and the run
// goes on to find out for itself.
export async function deliverDir(
  dir: string,
  key: string,
  store: RunStore,
  host: string,
  say: Messages,
  vouch: ((record: SpooledRun) => Promise<boolean>) | null = null,
): Promise<{ delivered: number; complete: boolean }> {
  let names: string[];
  try {
    checked(dir, false);
    names = readdirSync(dir);
  } catch {
    return { delivered: 0, complete: true };
  }
  const me = `.delivering-${process.pid}-${(processStart(process.pid) ?? 'unknown').replace('/', '_')}`;
  let delivered = 0;
  for (const name of names) {
    const base = /^(.*\.json)(?:\.delivering-(\d+)-(.+))?$/.exec(name);
    if (!base || (base[2] !== undefined && isSameProcess(Number(base[2]), (base[3] as string).replace('_', '/')))) continue;
    const original = join(dir, base[1] as string);
    const claimed = `${original}${me}`;
    try {
      renameSync(join(dir, name), claimed);
    } catch {
      continue;
    }
    const record = readRecord(claimed);
    if (record === null) {
      setAside(claimed, original, 'not a readable run record', say);
      continue;
    }
    const unfinishedHere = !record.outcome && record.run.host === host && isSameProcess(record.run.pid, record.run.wrapperStart);
    if (record.target !== key || unfinishedHere) {
      putBack(claimed, original);
      continue;
    }
    try {
      if (vouch && !(await vouch(record))) {
        putBack(claimed, original);
        continue;
      }
      if (!record.onlyIfRecorded || !store.holdsRun || (await store.holdsRun(record.run.runKey))) await store.importRun(record);
    } catch (error) {
      if (error instanceof RecordRefused) {
        setAside(claimed, original, `refused: ${describe(error)}`, say);
        continue;
      }
      putBack(claimed, original);
      say.verbose(`spooled runs in ${dir} wait for the next run (${describe(error)})`);
      return { delivered, complete: false };
    }
    rmSync(claimed);
    delivered++;
  }
  return { delivered, complete: true };
}

export function mkdirOnce(dir: string): void {
  // Asked first: see mkdirp.
  if (lstatSync(dir, { throwIfNoEntry: false })) return;
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
