import { hostname } from 'node:os';
import type { Settings } from '../cli/settings.js';
import { LocalLocks } from '../lock/held.js';
import { heldBySession, onThisMachine } from '../lock/lock-spec.js';
import { clockTime, tableTime } from '../present/format.js';
import type { JobStatus } from '../store/jobs.js';
import type { ServerLock, SharedStore } from '../store/shared.js';
import type { LeaseRow, RunRow } from '../store/types.js';
import { isRoot, resolveLockDir } from '../util/paths.js';
import { isSameProcess } from '../util/process-id.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';
import { colours, renderTable } from './table.js';

// A lock held right now, as `cronguard locks` shows it. `verified`: the kernel or the server
// confirmed it is held; a local lock on another host can only be read from the run log.
export interface HeldLock {
  job: string;
  lock: string;
  key: string | null;
  host: string | null;
  pid: number | null;
  run_id: number | null;
  since: string | null;
  holder_pid: number | null;
  verified: boolean;
  // A lease's (-l lease): its epoch (the holder's fencing token) and when it expires unless
  // renewed, on the server's clock.
  epoch?: string;
  expires_at?: string;
  expires_in_ms?: number;
  // A loop (--for) that holds it between its runs: until when its window lasts.
  holding_until?: string;
  // One of the slots of a job run with --max-running N > 1 (lock/slots.ts): which, of N (N
  // unknown for a lock file no run row explains).
  slot?: number;
  max_running?: number;
}

// `cronguard locks`: every lock held right now by a cronguard run the run log knows of,
// whatever its backend or lock file, plus held lock files in the lock directory that no
// run row explains (a --no-log run, or a command that outlived its wrapper).
export async function locks(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('locks', 'locks held right now and by whom'))
    .option('--lock-dir <dir>', 'where lock files live ($CRONGUARD_LOCK_DIR)')
    .option('--json', 'print one JSON array');
  parse(program, args);
  const flags = program.opts<{ json?: boolean; lockDir?: string }>();
  const choice = new StoreChoice(program.opts(), settings);
  const { dir } = resolveLockDir(settings.get('lock_dir', { value: flags.lockDir, name: '--lock-dir' }), process.env, isRoot());
  const store = await choice.openExisting();
  let running: RunRow[] = [];
  let server: ServerLock[] = [];
  let leases: LeaseRow[] = [];
  let holdings: HeldLock[] = [];
  try {
    running = store ? await store.listRuns({ status: 'running', limit: 10_000 }) : [];
    if (choice.db) server = await (store as SharedStore).databaseLocks();
    leases = (await store?.leases?.()) ?? [];
    holdings = fromLoops((await store?.jobStatus(null)) ?? [], server);
  } finally {
    await store?.close();
  }
  // Oldest first: the lock held longest is the one worth a look.
  const held = [...fromRuns(running, server), ...leases.map(fromLease), ...holdings, ...fromServer(server, running, holdings), ...unexplained(dir, running, holdings)].sort(
    (a, b) => (a.since ?? '~').localeCompare(b.since ?? '~') || a.job.localeCompare(b.job),
  );
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(held, null, 2)}\n`);
  } else if (held.length === 0) {
    process.stderr.write('cronguard: no locks held\n');
  } else {
    const c = colours();
    const rows = held.map((h) => [
      h.job, h.lock, h.host ?? '-', String(h.pid ?? h.holder_pid ?? '-'), tableTime(h.since), String(h.run_id ?? '-'),
      h.slot === undefined ? '-' : `${h.slot}${h.max_running === undefined ? '' : ` of ${h.max_running}`}`, [slotsHeld(h, held), note(h)].filter((n) => n !== '').join('; '),
    ]);
    const headers = ['JOB', 'LOCK', 'HOST', 'PID', 'SINCE', 'RUN', 'SLOT', 'NOTE'];
    // The slot is worth a column only where a job runs several copies at once.
    const hide = held.some((h) => h.slot !== undefined) ? [] : [headers.indexOf('SLOT')];
    process.stdout.write(renderTable(headers, rows, c, { hide, width: Number.POSITIVE_INFINITY }));
  }
  return 0;
}

const localLocks = new LocalLocks();

// "2 of 3 running", beside each slot a job's copies hold.
function slotsHeld(h: HeldLock, held: readonly HeldLock[]): string {
  if (h.slot === undefined || h.max_running === undefined) return '';
  return `${held.filter((o) => o.job === h.job && o.slot !== undefined).length} of ${h.max_running} running`;
}

function note(h: HeldLock): string {
  const loop = h.holding_until === undefined ? '' : `idle, holding until ${clockTime(h.holding_until)}`;
  if (!h.verified) return [loop, `per run log${h.host === hostname() ? ', its wrapper runs' : ' (other host)'}`].filter((n) => n !== '').join('; ');
  const lease = h.epoch === undefined ? '' : `epoch ${h.epoch}, expires in ${Math.ceil((h.expires_in_ms ?? 0) / 1000)}s`;
  return [loop, lease, h.run_id === null && loop === '' ? 'no run row' : ''].filter((n) => n !== '').join('; ');
}

// Loops (--for) holding their lock between runs, as the log says they do (JobStatus.holding),
// checked where that can be: by the server for its own locks, in /proc/locks on this host.
// A lease's holder is its row's (fromLease); a job whose run is running is fromRuns'.
function fromLoops(jobs: readonly JobStatus[], server: readonly ServerLock[]): HeldLock[] {
  const here = hostname();
  return jobs.flatMap((j) => {
    const h = j.holding;
    if (h === null || j.state === 'running' || h.lock === 'lease' || h.lock === 'none') return [];
    const verified = heldBySession(h.lock) ? server.some((s) => s.lock === h.lock && s.key === h.key) : h.host === here && h.key !== null && localLocks.holder(h.lock, h.key) !== undefined;
    if (!verified && (heldBySession(h.lock) || h.host === here)) return [];
    return [{ job: j.job, lock: h.lock, key: h.key, host: h.host, pid: h.pid, run_id: null, since: null, holder_pid: null, verified, holding_until: h.until }];
  });
}

const sameLock = (a: HeldLock, lock: string, key: string | null) => a.lock === lock && a.key === key;

// A lease held now (unexpired on the server's clock), as its row names its holder: the
// leases table is the truth of who holds it, whatever running rows say.
function fromLease(l: LeaseRow): HeldLock {
  return {
    job: l.job, lock: 'lease', key: l.key, host: l.host, pid: l.pid, run_id: l.run_id === null ? null : Number(l.run_id),
    since: l.acquired_at.toISOString(), holder_pid: null, verified: true,
    epoch: l.epoch, expires_at: l.expires_at.toISOString(), expires_in_ms: Number(l.expires_in_ms),
  };
}

// Running rows whose lock is held: checked in /proc/locks or the lock dir on this host, by
// the database server for its own locks, taken on trust for another host's local lock; a
// Redis lock of this host's while the wrapper that renews it runs (its server is not asked).
function fromRuns(running: readonly RunRow[], server: readonly ServerLock[]): HeldLock[] {
  const here = hostname();
  const held: HeldLock[] = [];
  for (const run of newestPerLock(running)) {
    // A lease's holder is in its row (fromLease), not to be guessed from running rows.
    if (run.lock_backend === null || run.lock_backend === 'none' || run.lock_backend === 'lease' || run.lock_key === null) continue;
    const base = { job: run.job, lock: run.lock_backend, key: run.lock_key, host: run.host, pid: run.pid, run_id: run.id, since: run.started_at, ...slotOf(run) };
    if (heldBySession(run.lock_backend)) {
      if (server.some((s) => s.lock === run.lock_backend && s.key === run.lock_key)) held.push({ ...base, holder_pid: null, verified: true });
    } else if (run.host !== here) {
      held.push({ ...base, holder_pid: null, verified: false });
    } else if (!onThisMachine(run.lock_backend)) {
      if (isSameProcess(run.pid, run.wrapper_start)) held.push({ ...base, holder_pid: null, verified: false });
    } else {
      const holder = localLocks.holder(run.lock_backend, run.lock_key);
      if (holder !== undefined) held.push({ ...base, holder_pid: holder, verified: true });
    }
  }
  return held;
}

// The slot a run holds, where its job has several (a job without them: nothing, as before).
function slotOf(run: RunRow): Pick<HeldLock, 'slot' | 'max_running'> {
  return (run.max_running ?? 1) > 1 ? { slot: run.slot ?? 0, max_running: run.max_running as number } : {};
}

// A lock can be held by one run at a time, and a run can only take it once the previous
// holder let go: of several `running` rows with one lock, only the newest can hold it (the
// others are wrappers that vanished and were not yet marked abandoned).
function newestPerLock(running: readonly RunRow[]): RunRow[] {
  const newest = new Map<string, RunRow>();
  for (const run of running) {
    const lock = `${heldBySession(run.lock_backend) ? '' : run.host}\0${run.lock_backend}\0${run.lock_key}`;
    if ((newest.get(lock)?.id ?? -1) < run.id) newest.set(lock, run);
  }
  return [...newest.values()];
}

// Database locks of this log's jobs with no running row (a --no-log run, a spooled one, an
// application holding a job off). A key that is neither a running row's nor a job's own in
// this log belongs to another schema, or to an application: not ours to show.
function fromServer(server: readonly ServerLock[], running: readonly RunRow[], holdings: readonly HeldLock[]): HeldLock[] {
  return server
    .filter((s) => s.jobsOwn && !running.some((r) => r.lock_backend === s.lock && r.lock_key === s.key) && !holdings.some((h) => sameLock(h, s.lock, s.key)))
    .map((s) => ({ job: s.job, lock: s.lock, key: s.key, host: null, pid: null, run_id: null, since: s.since, holder_pid: null, verified: true }));
}

// Held lock files in the lock dir that no running row (or loop) of this host accounts for;
// one of a slot above 0 says which (how many the job has, only its runs record).
function unexplained(dir: string, running: readonly RunRow[], holdings: readonly HeldLock[]): HeldLock[] {
  const here = hostname();
  const known = new Set([...running.filter((r) => r.host === here).map((r) => r.lock_key), ...holdings.filter((h) => h.host === here).map((h) => h.key)]);
  return localLocks
    .inDirectory(dir)
    .filter((l) => !known.has(l.path))
    .map((l) => ({ job: l.job, lock: l.lock, key: l.path, host: here, pid: null, run_id: null, since: null, holder_pid: l.holder, verified: true, ...(l.slot > 0 ? { slot: l.slot } : {}) }));
}
