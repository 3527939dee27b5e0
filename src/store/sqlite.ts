import { closeSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { mkdirp } from '../util/io.js';
import { SQLITE_FILE } from '../util/paths.js';
import { checkPrivateDirectory, openRegular } from '../util/safe-path.js';
import { outcomeOf, runOf, type SpooledRun, type StoredOutcome } from './spool.js';
import { migrateSqlite } from './sqlite-migrations.js';
import type { Admission, AdmitOptions, Holder, NewRun, RunFilter, RunningRow, RunOutcome, RunRow, RunStore } from './types.js';


const RUN_COLUMNS = 'job, host, trigger, attempt, pid, username, command, started_at, tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start';
const RUN_VALUES = '@job, @host, @trigger, @attempt, @pid, @username, @command, @started_at, @tick, @lock_backend, @lock_key, @run_key, @invoked_at, @wrapper_start';
const OUTCOME = 'status, finished_at, duration_ms, exit_code, signal, output, output_truncated, error';

// Every SQLite statement of the run log lives here, parameterised.
const SQL = {
  runningHere: `SELECT id, pid, wrapper_start, lock_backend, lock_key FROM runs WHERE job = ? AND host = ? AND status = 'running'`,
  abandon: `UPDATE runs SET status = 'abandoned', finished_at = ?,
              error = 'wrapper (pid ' || pid || ') vanished without recording an outcome'
            WHERE id = ? AND status = 'running'`,
  pendingOverlaps: `SELECT pending_overlaps AS n FROM jobs WHERE name = ?`,
  resetOverlaps: `UPDATE jobs SET pending_overlaps = 0 WHERE name = ?`,
  insertRun: `INSERT INTO runs (status, overlaps, ${RUN_COLUMNS}) VALUES ('running', @overlaps, ${RUN_VALUES})`,
  // A run of another host in this tick or a later one: it served (or overtook) this tick.
  // One from a minute beyond this host's clock came from a clock running ahead: ignored.
  tickRun: `SELECT id, host, pid, started_at FROM runs WHERE job = ? AND tick >= ? AND tick <= ? AND host <> ?
            ORDER BY id DESC LIMIT 1`,
  countSkip: `UPDATE runs SET overlaps = overlaps + 1 WHERE id = ?`,
  setChildPid: `UPDATE runs SET child_pid = ? WHERE id = ?`,
  finishRun: `UPDATE runs SET status = @status, finished_at = @finished_at, duration_ms = @duration_ms, exit_code = @exit_code,
                signal = @signal, output = @output, output_truncated = @output_truncated, error = @error
              WHERE id = @id`,
  // A skip, on the running row, else on the latest run whose wrapper (the pid that took the
  // lock, from /proc/locks) left something running that holds the lock still.
  overlap: `UPDATE runs SET overlaps = overlaps + 1
            WHERE id = coalesce((SELECT max(id) FROM runs WHERE job = @job AND status = 'running'),
                                (SELECT max(id) FROM runs WHERE job = @job AND pid = @holder_pid))
            RETURNING id, host, pid, started_at`,
  overlapPending: `INSERT INTO jobs (name, pending_overlaps) VALUES (?, 1)
                   ON CONFLICT (name) DO UPDATE SET pending_overlaps = pending_overlaps + 1`,
  // One row per run key, however often a record is written.
  importRun: `INSERT INTO runs (${RUN_COLUMNS}, child_pid, ${OUTCOME})
              VALUES (${RUN_VALUES}, @child_pid, @status, @finished_at, @duration_ms, @exit_code, @signal, @output,
                @output_truncated, @error)
              ON CONFLICT (run_key) DO UPDATE SET child_pid = coalesce(excluded.child_pid, child_pid), status = excluded.status,
                finished_at = excluded.finished_at, duration_ms = excluded.duration_ms, exit_code = excluded.exit_code,
                signal = excluded.signal, output = excluded.output, output_truncated = excluded.output_truncated,
                error = excluded.error
              RETURNING id`,
  listRuns: `SELECT * FROM runs
             WHERE (@job IS NULL OR job = @job) AND (@status IS NULL OR status = @status)
             ORDER BY id DESC LIMIT @limit`,
  getRun: `SELECT * FROM runs WHERE id = ?`,
  latestRun: `SELECT * FROM runs WHERE job = ? ORDER BY id DESC LIMIT 1`,
} as const;

// A new run's named parameters, in both stores' column names.
export function runParams(run: NewRun): Record<string, unknown> {
  return {
    job: run.job, host: run.host, trigger: run.trigger, attempt: run.attempt, pid: run.pid, username: run.username,
    command: run.command, started_at: run.startedAt.toISOString(), tick: run.tick?.toISOString() ?? null,
    lock_backend: run.lockBackend, lock_key: run.lockKey, run_key: run.runKey, invoked_at: run.invokedAt.toISOString(),
    wrapper_start: run.wrapperStart,
  };
}

// An outcome's named parameters, as SQLite stores them.
function outcomeParams(o: StoredOutcome): Record<string, unknown> {
  return {
    status: o.status, finished_at: o.finishedAt, duration_ms: o.durationMs, exit_code: o.exitCode, signal: o.signal,
    output: o.output, output_truncated: o.outputTruncated ? 1 : 0, error: o.error,
  };
}

type Row = Omit<RunRow, 'output_truncated'> & { output_truncated: number };
type HolderRow = { id: number; host: string; pid: number; started_at: string };

function toHolder(row: HolderRow): Holder {
  return { runId: row.id, host: row.host, pid: row.pid, startedAt: row.started_at };
}

// The embedded run log: one SQLite file in WAL mode, private to the user (0600).
export class SqliteStore implements RunStore {
  private constructor(private readonly db: Database.Database) {}

  static open(stateDir: string): SqliteStore {
    mkdirp(stateDir, 0o700);
    checkPrivateDirectory(stateDir, 'state directory');
    const file = join(stateDir, SQLITE_FILE);
    // SQLite creates -wal and -shm with the database file's mode, so creating the file
    // 0600 first keeps all three private; and a link or FIFO in its place is refused.
    closeSync(openRegular(file, constants.O_RDONLY | constants.O_CREAT, 'run log', file, 0o600));
    // The addon is located directly: better-sqlite3's own lookup (the `bindings` package)
    // probes a dozen paths on every start.
    const db = new Database(file, {
      timeout: 10_000,
      nativeBinding: createRequire(import.meta.url).resolve('better-sqlite3/build/Release/better_sqlite3.node'),
    });
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    migrateSqlite(db);
    return new SqliteStore(db);
  }

  async admit(run: NewRun, { oneRunPerTick, isGone }: AdmitOptions): Promise<Admission> {
    const { db } = this;
    const admit = db.transaction((): Admission => {
      const tick = run.tick?.toISOString() ?? null;
      if (oneRunPerTick && tick !== null) {
        const ahead = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 60_000).toISOString();
        const other = db.prepare(SQL.tickRun).get(run.job, tick, ahead, run.host) as HolderRow | undefined;
        if (other) {
          db.prepare(SQL.countSkip).run(other.id);
          return { admitted: false, reason: 'tick', holder: toHolder(other) };
        }
      }
      const now = run.startedAt.toISOString();
      for (const row of db.prepare(SQL.runningHere).all(run.job, run.host) as RunningRow[]) {
        if (isGone(row)) db.prepare(SQL.abandon).run(now, row.id);
      }
      const pending = (db.prepare(SQL.pendingOverlaps).get(run.job) as { n: number } | undefined)?.n ?? 0;
      if (pending > 0) db.prepare(SQL.resetOverlaps).run(run.job);
      const info = db.prepare(SQL.insertRun).run({ ...runParams(run), overlaps: pending });
      return { admitted: true, runId: Number(info.lastInsertRowid) };
    });
    return admit.immediate();
  }

  async setChildPid(id: number, childPid: number): Promise<void> {
    this.db.prepare(SQL.setChildPid).run(childPid, id);
  }

  async finishRun(id: number, o: RunOutcome): Promise<void> {
    this.db.prepare(SQL.finishRun).run({ id, ...outcomeParams({ ...o, finishedAt: o.finishedAt.toISOString() }) });
  }

  async recordOverlap(job: string, _host: string | null, holderPid: number | null): Promise<Holder | null> {
    const { db } = this;
    return db
      .transaction((): Holder | null => {
        const holder = db.prepare(SQL.overlap).get({ job, holder_pid: holderPid }) as HolderRow | undefined;
        if (!holder) db.prepare(SQL.overlapPending).run(job);
        return holder ? toHolder(holder) : null;
      })
      .immediate();
  }

  async importRun(record: SpooledRun): Promise<number> {
    const params = { ...runParams(runOf(record)), child_pid: record.childPid, ...outcomeParams(outcomeOf(record)) };
    return (this.db.prepare(SQL.importRun).get(params) as { id: number }).id;
  }

  async listRuns(filter: RunFilter): Promise<RunRow[]> {
    const rows = this.db
      .prepare(SQL.listRuns)
      .all({ job: filter.job ?? null, status: filter.status ?? null, limit: filter.limit }) as Row[];
    return rows.map(toRunRow);
  }

  async getRun(id: number): Promise<RunRow | null> {
    const row = this.db.prepare(SQL.getRun).get(id) as Row | undefined;
    return row ? toRunRow(row) : null;
  }

  async latestRun(job: string): Promise<RunRow | null> {
    const row = this.db.prepare(SQL.latestRun).get(job) as Row | undefined;
    return row ? toRunRow(row) : null;
  }

  async migrate(): Promise<number> {
    return migrateSqlite(this.db);
  }

  async close(): Promise<void> {
    this.db.close();
  }
}

function toRunRow(row: Row): RunRow {
  return { ...row, output_truncated: row.output_truncated === 1 };
}
