import { closeSync, constants, fsyncSync, readdirSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Messages } from '../util/io.js';
import { checkPrivateDirectory, openRegular, preparePrivateDirectory } from '../util/safe-path.js';
import { ownSubdir } from '../util/sharing.js';
import { checked, deliverDir, RunKeyTaken, waiting } from './spool-files.js';
import type { NewRun, RunOutcome, RunStatus, RunStore } from './types.js';

export { RunKeyTaken };

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

// Run records kept on local disk while the shared run log is unreachable, one JSON file per
// run, delivered by the next invocation that can connect. Nothing is lost: a file is removed
// only after its row is in the database. Each database and schema has directories of its
// own, so a record is never delivered into another schema:
// - once a session has named the server (its system identifier, see PostgresStore), records
//   go under that identity, database and schema (`id-` directories): a standby promoted
//   after a failover has the same identity, so what was spooled against the old primary is
//   delivered to the new one, whatever the URL now says;
// - before that (the server never answered), under the URL's hosts, database and schema.
// A session delivers its URL's directory, the one of the server it reached (the key of
// older versions, host:port/database/schema) and, when `id-` directories wait, its server's.
export class Spool {
  private readonly root: string;
  // Keys whose directories this spool delivers; the first is the URL's.
  private readonly keys: string[];
  private writeKey: string;
  private identified = false;

  // `target`: the URL's hosts, database and schema; `scope`: database and schema alone.
  constructor(
    private readonly stateDir: string,
    target: string,
    private readonly scope: string = target,
  ) {
    this.root = ownSubdir(stateDir, 'spool');
    this.keys = [target];
    this.writeKey = target;
  }

  // Where this run's records go now.
  get dir(): string {
    return this.dirOf(this.writeKey);
  }

  // A session reached this server (host:port/database/schema): its directory is delivered too.
  reached(key: string): void {
    if (!this.keys.includes(key)) this.keys.push(key);
  }

  // The server's system identifier: records go under it from now on, and wait there for
  // any session to the same server (or its promoted standby).
  identify(systemIdentifier: string): void {
    const key = `system ${systemIdentifier}/${this.scope}`;
    if (!this.keys.includes(key)) this.keys.push(key);
    this.writeKey = key;
    this.identified = true;
  }

  private dirOf(key: string): string {
    return join(this.root, key.startsWith('system ') ? `id-${fnv1a(key)}` : fnv1a(key));
  }

  // Written in full and flushed to disk before it takes its name: a full disk or a crash
  // leaves the previous record of the run (or none), never a truncated one.
  write(record: SpooledRun): void {
    // The state directory is checked before anything is made in it.
    const shared = preparePrivateDirectory(this.stateDir, 'state directory') !== null;
    const dir = this.dir;
    checked(dir, true, shared);
    const file = join(dir, `${record.run.runKey.replace(/[^A-Za-z0-9._-]/g, '_')}.json`);
    const temp = `${file}.tmp`;
    rmSync(temp, { force: true });
    const fd = openRegular(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 'spool file', temp, 0o600);
    try {
      const bytes = Buffer.from(JSON.stringify({ ...record, target: this.writeKey }));
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

  // Moves every finished (or orphaned) record of this spool's directories into the store.
  // The server's identity is asked for (one statement) only when `id-` directories hold
  // records and the session has not told it yet.
  async deliver(store: RunStore, host: string, say: Messages): Promise<number> {
    let names: string[];
    try {
      checkPrivateDirectory(this.root, 'spool directory');
      names = readdirSync(this.root);
    } catch {
      return 0;
    }
    if (!this.identified && store.serverIdentity && names.some((name) => name.startsWith('id-') && waiting(join(this.root, name)))) {
      const identity = await store.serverIdentity();
      if (identity !== null) this.identify(identity);
    }
    let delivered = 0;
    for (const key of this.keys) {
      const dir = this.dirOf(key);
      if (!names.includes(basename(dir))) continue;
      const done = await deliverDir(dir, key, store, host, say);
      delivered += done.delivered;
      if (!done.complete) break;
    }
    return delivered;
  }
}

// A short, stable directory name for a database and schema (FNV-1a, 32 bits): no crypto on
// the run path for it.
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, '0');
}
