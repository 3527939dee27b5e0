import { NotFoundError } from '../errors.js';
import type { PgSession } from '../pg/session.js';
import { migratePostgres, POSTGRES_MIGRATIONS } from './postgres-migrations.js';
import { statements } from './postgres-sql.js';
import type { SpooledRun } from './spool.js';
import type { Admission, AdmitOptions, Holder, NewRun, RunFilter, RunOutcome, RunRow, RunStore } from './types.js';

// Errors that mean the schema is missing or older than this code: migrate and try again.
const SCHEMA_MISSING = new Set(['42P01', '3F000', '42703']);

// The shared run log in PostgreSQL. It may share its session with the postgres lock, which
// is what lets one statement take the lock and record the run.
export class PostgresStore implements RunStore {
  private readonly sql: ReturnType<typeof statements>;

  // `create`: a missing schema is created on first use (runs, migrate); a reader (history,
  // logs, locks) must not create one as a side effect of looking, say in a mistyped schema.
  constructor(
    readonly session: PgSession,
    private readonly schema: string,
    private readonly create = true,
  ) {
    this.sql = statements(session.escapeIdentifier(schema));
  }

  async admit(run: NewRun, { oneRunPerTick, isAlive }: AdmitOptions): Promise<Admission> {
    const values = [...runValues(run), oneRunPerTick, minuteNow()];
    const [row] = await this.withSchema(() => this.session.query<AdmitRow>(this.sql.admit, values));
    await this.upgradeIfBehind(row?.version);
    if (row?.id === null || row?.id === undefined) return { admitted: false, reason: 'tick', holder: toHolder(row?.holder) };
    const dead = (row.running ?? []).filter((r) => !isAlive(r.pid)).map((r) => String(r.id));
    if (dead.length > 0) await this.session.query(this.sql.abandon, [dead]);
    return { admitted: true, runId: Number(row.id) };
  }

  // Tries the advisory lock and, if it is ours and the fleet rule allows, records the run.
  // When another session holds the lock, counts the skip (countSkip) on its run.
  async lockAndAdmit(run: NewRun, key: bigint, oneRunPerTick: boolean, countSkip: boolean): Promise<Admission> {
    const values = [...runValues(run), oneRunPerTick, minuteNow(), key.toString(), countSkip];
    const [row] = await this.withSchema(() => this.session.query<AdmitRow & { got: boolean }>(this.sql.lockAndAdmit, values));
    if (!row?.got) return { admitted: false, reason: 'locked', holder: toHolder(row?.holder) };
    await this.upgradeIfBehind(row.version);
    if (row.id === null) return { admitted: false, reason: 'tick', holder: toHolder(row.holder) };
    return { admitted: true, runId: Number(row.id) };
  }

  async unlock(key: bigint): Promise<void> {
    await this.session.query(this.sql.unlock, [key.toString()]);
  }

  async setChildPid(id: number, childPid: number): Promise<void> {
    await this.session.query(this.sql.setChildPid, [id, childPid]);
  }

  async finishRun(id: number, o: RunOutcome): Promise<void> {
    // PostgreSQL text cannot hold NUL bytes.
    const output = o.output === null ? null : o.output.replaceAll('\0', '');
    await this.session.query(this.sql.finish, [
      id, o.status, o.finishedAt, o.durationMs, o.exitCode, o.signal, output, o.outputTruncated, o.error,
    ]);
  }

  // pg_stat_activity hides other roles' session details (backend_start among them) from a
  // role without pg_read_all_stats, so `since` may be unknown.
  async advisoryLocks(): Promise<AdvisoryLock[]> {
    const rows = await this.session.query<Omit<AdvisoryLock, 'since'> & { backend_start: Date | null }>(this.sql.advisoryLocks);
    return rows.map(({ backend_start, ...r }) => ({ ...r, since: backend_start?.toISOString() ?? null }));
  }

  async importRun(record: SpooledRun): Promise<number> {
    const finish = finishValues(record);
    if (record.id !== null) {
      await this.session.query(this.sql.importUpdate, [record.id, record.childPid, ...finish]);
      return record.id;
    }
    const r = record.run;
    const run = { ...r, startedAt: new Date(r.startedAt), tick: r.tick === null ? null : new Date(r.tick) };
    const [row] = await this.withSchema(() => this.session.query<{ id: string }>(this.sql.importInsert, [...runValues(run), record.childPid, ...finish]));
    return Number(row?.id);
  }

  async recordOverlap(job: string, host: string | null = null): Promise<Holder | null> {
    const [row] = await this.withSchema(() => this.session.query<HolderRow>(this.sql.overlap, [job, host]));
    return toHolder(row);
  }

  async listRuns(filter: RunFilter): Promise<RunRow[]> {
    const rows = await this.withSchema(() =>
      this.session.query<PgRow>(this.sql.list, [filter.job ?? null, filter.status ?? null, filter.limit]),
    );
    return rows.map(toRunRow);
  }

  async getRun(id: number): Promise<RunRow | null> {
    const [row] = await this.withSchema(() => this.session.query<PgRow>(this.sql.get, [id]));
    return row ? toRunRow(row) : null;
  }

  async latestRun(job: string): Promise<RunRow | null> {
    const [row] = await this.withSchema(() => this.session.query<PgRow>(this.sql.latest, [job]));
    return row ? toRunRow(row) : null;
  }

  migrate(): Promise<number> {
    return migratePostgres(this.session, this.schema);
  }

  async close(): Promise<void> {
    await this.session.close();
  }

  // The hot path does not check the schema first: a statement that fails because the
  // schema is missing migrates and retries, saving a round trip on every run.
  private async withSchema<T>(attempt: () => Promise<T>): Promise<T> {
    try {
      return await attempt();
    } catch (error) {
      if (!SCHEMA_MISSING.has((error as { code?: string }).code ?? '')) throw error;
      if (!this.create) {
        throw new NotFoundError(`no run log in schema ${this.schema} at ${this.session.db.display} (nothing was recorded there)`);
      }
      await this.migrate();
      return attempt();
    }
  }

  // After a statement that worked: a schema behind this code is upgraded, best effort. A role
  // that may not migrate still recorded its run; the statement that needs the new schema
  // fails, migrates and retries on its own (withSchema).
  private async upgradeIfBehind(version: number | null | undefined): Promise<void> {
    if ((version ?? 0) < POSTGRES_MIGRATIONS.length) await this.migrate().catch(() => {});
  }
}

// An advisory lock held by a cronguard session. `job` is its application_name's tail, cut
// at 63 bytes by PostgreSQL; the run row has the full name.
export interface AdvisoryLock {
  job: string;
  key: string;
  backend_pid: number;
  client: string;
  since: string | null;
}

interface AdmitRow {
  id: string | null;
  running?: { id: number; pid: number }[];
  holder: HolderRow | null;
  version: number | null;
}

// A run row's id, host, pid and start, as a row or as row_to_json made it.
interface HolderRow {
  id: string | number;
  host: string;
  pid: number;
  started_at: Date | string;
}

function toHolder(row: HolderRow | null | undefined): Holder | null {
  if (!row) return null;
  const startedAt = row.started_at instanceof Date ? row.started_at.toISOString() : new Date(row.started_at).toISOString();
  return { runId: Number(row.id), host: row.host, pid: row.pid, startedAt };
}

type PgRow = Omit<RunRow, 'id' | 'started_at' | 'finished_at' | 'duration_ms' | 'request_id' | 'tick'> & {
  id: string;
  started_at: Date;
  finished_at: Date | null;
  tick: Date | null;
  duration_ms: string | null;
  request_id: string | null;
};

// status .. error of a spooled run; one that never finished is recorded abandoned.
function finishValues({ outcome: o }: SpooledRun): unknown[] {
  if (!o) return ['abandoned', new Date(), null, null, null, null, false, 'wrapper vanished before its run could be recorded'];
  const output = o.output === null ? null : o.output.replaceAll('\0', '');
  return [o.status, new Date(o.finishedAt), o.durationMs, o.exitCode, o.signal, output, o.outputTruncated, o.error];
}

// This host's current minute: a claimed tick beyond it came from a clock running ahead.
function minuteNow(): Date {
  return new Date(Math.floor(Date.now() / 60_000) * 60_000);
}

// $1 to $11, in the order of RUN_COLUMNS.
function runValues(run: NewRun): unknown[] {
  return [run.job, run.host, run.trigger, run.attempt, run.pid, run.username, run.command, run.startedAt, run.tick, run.lockBackend, run.lockKey];
}

function toRunRow(row: PgRow): RunRow {
  return {
    ...row,
    id: Number(row.id),
    started_at: row.started_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
    tick: row.tick?.toISOString() ?? null,
    duration_ms: row.duration_ms === null ? null : Number(row.duration_ms),
    request_id: row.request_id === null ? null : Number(row.request_id),
  };
}
