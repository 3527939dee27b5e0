import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { STALE_MS } from '../lock/lockfile.js';
import type { DbConfig } from '../pg/config.js';
import { connectPostgres, openPostgresStore } from '../store/index.js';
import type { HeldLock } from '../store/postgres.js';
import type { RunRow } from '../store/types.js';
import { isRoot, resolveLockDir } from '../util/paths.js';
import { dbOf, openExistingStoreFor, parse, subcommand, withStoreOptions } from './common.js';
import { colours, renderTable, shortTime } from './table.js';

interface Flags {
  json?: boolean;
  lockDir?: string;
  stateDir?: string;
  db?: string;
  schema?: string;
}

// `cronguard locks`: the locks held right now and by whom. With a database, the advisory
// locks of cronguard sessions (pg_locks joined with pg_stat_activity and the running rows);
// otherwise the lock files in the lock directory that someone holds.
export async function locks(args: readonly string[]): Promise<number> {
  const program = withStoreOptions(subcommand('locks', 'locks held right now and by whom'))
    .option('--lock-dir <dir>', 'where lock files live ($CRONGUARD_LOCK_DIR)')
    .option('--json', 'print one JSON array');
  parse(program, args);
  const flags = program.opts<Flags>();
  const db = dbOf(flags);
  const held = db ? await postgresLocks(db) : await localLocks(flags);
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(held, null, 2)}\n`);
  } else if (held.length === 0) {
    process.stderr.write('cronguard: no locks held\n');
  } else {
    const c = colours();
    const rows = held.map((h) => [h.job, h.lock, h.host ?? '-', String(h.pid ?? '-'), shortTime(h.since), String(h.run_id ?? '-')]);
    process.stdout.write(renderTable(['JOB', 'LOCK', 'HOST', 'PID', 'SINCE', 'RUN'], rows, c));
  }
  return 0;
}

async function postgresLocks(db: DbConfig): Promise<HeldLock[]> {
  const store = await openPostgresStore(await connectPostgres(db, 'cronguard'), db.schema);
  try {
    return await store.heldLocks();
  } finally {
    await store.close();
  }
}

async function localLocks(flags: Flags): Promise<HeldLock[]> {
  const { dir } = resolveLockDir(flags.lockDir, process.env, isRoot());
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const store = await openExistingStoreFor(flags);
  const running = store ? await store.listRuns({ status: 'running', limit: 10_000 }) : [];
  await store?.close();
  const holder = (job: string): RunRow | undefined => running.find((r) => r.job === job);
  const flocks = heldFlocks();
  const held: HeldLock[] = [];
  for (const name of names) {
    const path = join(dir, name);
    const job = name.replace(/\.(lock|lockdir)$/, '');
    const lockPid = name.endsWith('.lock') ? flockHolder(path, flocks) : undefined;
    const kind = lockPid !== undefined ? 'flock' : name.endsWith('.lockdir') && isFresh(path) ? 'lockfile' : null;
    if (!kind) continue;
    const run = holder(job);
    const pid = run?.pid ?? lockPid ?? null;
    held.push({ job, lock: kind, key: path, host: run?.host ?? null, pid, run_id: run?.id ?? null, since: run?.started_at ?? null });
  }
  return held;
}

// flock(2) locks held right now, by device and inode, from /proc/locks: reading it takes
// no lock, so looking can never make a starting job skip.
function heldFlocks(): Map<string, number> {
  const held = new Map<string, number>();
  let text = '';
  try {
    text = readFileSync('/proc/locks', 'utf8');
  } catch {
    return held;
  }
  for (const line of text.split('\n')) {
    const m = /^\d+:\s+FLOCK\s+\S+\s+\S+\s+(\d+)\s+([0-9a-f]+):([0-9a-f]+):(\d+)/.exec(line);
    if (m) held.set(`${Number.parseInt(m[2] as string, 16)}:${Number.parseInt(m[3] as string, 16)}:${m[4]}`, Number(m[1]));
  }
  return held;
}

function flockHolder(path: string, held: Map<string, number>): number | undefined {
  try {
    const { dev, ino } = statSync(path, { bigint: true });
    const major = Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn));
    const minor = Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn));
    return held.get(`${major}:${minor}:${ino}`);
  } catch {
    return undefined;
  }
}

function isFresh(path: string): boolean {
  try {
    return Date.now() - statSync(path).mtimeMs < STALE_MS;
  } catch {
    return false;
  }
}
