import { closeSync, constants, fsyncSync, readdirSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Messages } from '../util/io.js';
import { checkPrivateDirectory, openRegular, preparePrivateDirectory } from '../util/safe-path.js';
import { ownSubdir } from '../util/sharing.js';
import { unlinkQuietly } from '../util/stamp.js';
import type { RunStore } from './run-store.js';
import { checked, deliverDir, waiting } from './spool-files.js';
import type { SpooledRun } from './spool-record.js';


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
// It also delivers the directories of other URLs whose server it is: the identity of the
// server each URL last reached is remembered (in `known/`, under the URL directory's name),
// since what a failover strands is exactly what was spooled under the old URL while its
// server was out of reach, before the URL was pointed at the promoted standby.
//
// An identity is no proof on its own: a physical copy of the server (staging restored from a
// base backup and promoted on its own) has the same system identifier, and so has its
// database's OID; its timeline moves on promotion as a failed-over standby's does; a row the
// schema got at creation is copied with it. What a copy made before a run lacks is that run.
// So a record reaching a server other than through its own URL is delivered only when the
// server holds its witness (see SpooledRun): a promoted standby holds what its primary
// recorded; a copy made before the run, or another server that happens to share the identity
// (two MariaDBs of one host, both server_id 1), does not, and the record waits for its own.
// Where the last run the witness names never reached the standby (replication lagged at the
// failover), the record waits for its URL.
export class Spool {
  private readonly root: string;
  // Keys whose directories this spool delivers; the first is the URL's.
  private readonly keys: string[];
  // Those of them this session reaches by name (its URL, the server it reached): their
  // records are delivered without a witness.
  private readonly own: Set<string>;
  private writeKey: string;
  private identity: string | null = null;
  // What known/ says of this spool's URL (see remember); undefined until read.
  private known: Known | null | undefined;

  // `target`: the URL's hosts, database and schema; `scope`: database and schema alone.
  constructor(
    private readonly stateDir: string,
    target: string,
    private readonly scope: string = target,
  ) {
    this.root = ownSubdir(stateDir, 'spool');
    this.keys = [target];
    this.own = new Set([target]);
    this.writeKey = target;
  }

  // Where this run's records go now.
  get dir(): string {
    return this.dirOf(this.writeKey);
  }

  // A session reached this server (host:port/database/schema): its directory is delivered too.
  reached(key: string): void {
    if (!this.keys.includes(key)) this.keys.push(key);
    this.own.add(key);
  }

  // The server's system identifier: records go under it from now on, and wait there for
  // any session to the same server (or its promoted standby).
  identify(systemIdentifier: string): void {
    const key = `system ${systemIdentifier}/${this.scope}`;
    if (!this.keys.includes(key)) this.keys.push(key);
    this.writeKey = key;
    this.identity = systemIdentifier;
    const known = this.knownOfUrl();
    this.remember({ identity: systemIdentifier, witness: known?.identity === systemIdentifier ? (known.witness ?? null) : null });
  }

  // A run was recorded through this URL (its run key): the witness of the records this URL's
  // runs spool until the next one is (see SpooledRun).
  // This process knows it at once; the file is written in the next turn of the event loop,
  // once the run's command has been spawned, rather than before (its directories are checked
  // and the file replaced: ~2 ms on every run's start).
  witnessed(runKey: string): void {
    if (this.identity !== null) this.remember({ identity: this.identity, witness: runKey }, true);
  }

  // known/'s entry for this spool's URL.
  private knownOfUrl(): Known | null {
    if (this.known === undefined) this.known = this.readKnown(basename(this.dirOf(this.keys[0] as string)));
    return this.known;
  }

  private readKnown(name: string): Known | null {
    try {
      return JSON.parse(this.read(join(this.root, 'known', name)) ?? 'null') as Known | null;
    } catch {
      // Unreadable: as if unknown.
      return null;
    }
  }

  // Which server this spool's URL reached, and the last run recorded there through it, unless
  // already known: one small read per run, a write when either changes.
  private remember(what: { identity: string; witness: string | null }, later = false): void {
    const key = this.keys[0] as string;
    const before = this.knownOfUrl();
    if (before?.key === key && before.identity === what.identity && (before.witness ?? null) === what.witness) return;
    this.known = { key, ...what };
    if (!later) {
      this.writeKnown();
    } else if (!this.writing) {
      this.writing = true;
      setImmediate(() => {
        this.writing = false;
        this.writeKnown();
      });
    }
  }

  // A write of known/'s entry waits for the next turn of the event loop (see witnessed).
  private writing = false;

  // known/'s entry for this spool's URL as this process knows it now.
  private writeKnown(): void {
    const key = this.keys[0] as string;
    const dir = join(this.root, 'known');
    const file = join(dir, basename(this.dirOf(key)));
    const known = JSON.stringify(this.known);
    try {
      // Made as write() makes its directories.
      checked(dir, true, preparePrivateDirectory(this.stateDir, 'state directory') !== null);
      // Of this process: every run of the URL writes it.
      const temp = `${file}.${process.pid}.tmp`;
      const fd = createTemp(temp);
      try {
        writeSync(fd, known);
      } finally {
        closeSync(fd);
      }
      renameSync(temp, file);
    } catch {
      // Unremembered: only a later failover's records would wait for their URL.
    }
  }

  private read(file: string): string | null {
    try {
      const fd = openRegular(file, constants.O_RDONLY, 'spool file');
      try {
        return readFileSync(fd, 'utf8');
      } finally {
        closeSync(fd);
      }
    } catch {
      return null;
    }
  }

  // The other URLs whose records wait and whose server, when last reached, was `identity`.
  private formerUrls(names: string[], identity: string): string[] {
    const keys: string[] = [];
    for (const name of names) {
      if (name.startsWith('id-') || this.keys.some((key) => this.dirOf(key) === join(this.root, name)) || !waiting(join(this.root, name))) continue;
      // Unreadable: that URL's records wait for it.
      const known = this.readKnown(name);
      if (known?.identity === identity && known.key?.endsWith(`/${this.scope}`) && !this.keys.includes(known.key)) keys.push(known.key);
    }
    return keys;
  }

  // Whether directories of other URLs (see formerUrls) wait for a server to be named.
  private formerWaiting(names: string[]): boolean {
    return names.some((name) => !name.startsWith('id-') && this.keys.every((key) => this.dirOf(key) !== join(this.root, name)) && waiting(join(this.root, name)));
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
    const fd = createTemp(temp);
    try {
      const witness = record.id !== null ? record.run.runKey : (this.knownOfUrl()?.witness ?? null);
      const bytes = Buffer.from(JSON.stringify({ ...record, target: this.writeKey, from: this.keys[0], witness }));
      for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done);
      fsyncSync(fd);
    } catch (error) {
      unlinkQuietly(temp);
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
    const unnamed = names.some((name) => name.startsWith('id-') && waiting(join(this.root, name))) || this.formerWaiting(names);
    if (this.identity === null && store.serverIdentity && unnamed) {
      const identity = await store.serverIdentity();
      if (identity !== null) this.identify(identity);
    }
    if (this.identity !== null) for (const key of this.formerUrls(names, this.identity)) this.keys.push(key);
    const vouch = this.voucher(store, say);
    let delivered = 0;
    for (const key of this.keys) {
      const dir = this.dirOf(key);
      if (!names.includes(basename(dir))) continue;
      const done = await deliverDir(dir, key, store, host, say, this.own.has(key) ? null : vouch);
      delivered += done.delivered;
      if (!done.complete) break;
    }
    return delivered;
  }

  // Whether a record that reached this server by its identity alone belongs here (see Spool):
  // made through this session's URL, or its witness is in the log (asked once per witness).
  // Records of older versions, which name no witness, are delivered as they were.
  private voucher(store: RunStore, say: Messages): (record: SpooledRun) => Promise<boolean> {
    const asked = new Map<string, Promise<boolean>>();
    return async (record) => {
      if (record.from === this.keys[0] || record.witness === undefined || !store.holdsRun) return true;
      const { witness } = record;
      if (witness !== null && !asked.has(witness)) asked.set(witness, (store.holdsRun as (runKey: string) => Promise<boolean>).call(store, witness));
      if (witness !== null && (await (asked.get(witness) as Promise<boolean>))) return true;
      say.verbose(`spooled run record ${record.run.runKey} waits for its own server: this one, though it has the same identity, has no trace of ${witness === null ? 'any run of its URL' : `run ${witness}`} (a copy made before it?)`);
      return false;
    };
  }
}

// A file of this name made afresh: one a crash left under it is replaced. (Not removed
// first: removing what is not there throws, and an error's stack cost every run more.)
function createTemp(temp: string): number {
  const open = () => openRegular(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 'spool file', temp, 0o600);
  try {
    return open();
  } catch (error) {
    if ((error as { cause?: NodeJS.ErrnoException }).cause?.code !== 'EEXIST') throw error;
    unlinkQuietly(temp);
    return open();
  }
}

// What known/ holds for a URL: the server it last reached and the last run recorded there
// through it (absent from entries of older versions).
interface Known {
  readonly key?: string;
  readonly identity?: string;
  readonly witness?: string | null;
}

// A short, stable directory name for a database and schema (FNV-1a, 32 bits): no crypto on
// the run path for it.
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, '0');
}
