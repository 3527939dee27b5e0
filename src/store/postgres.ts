import { NotFoundError } from '../errors.js';
import type { PgSession } from '../pg/session.js';
import type { QueryResultRow } from 'pg';
import { migratePostgres, POSTGRES_MIGRATIONS } from './postgres-migrations.js';
import { type Statement, statements } from './postgres-sql.js';
import { outcomeOf, runOf, type SpooledRun, type StoredOutcome } from './spool.js';
import type { Admission, AdmitOptions, Holder, NewRun, RunFilter, RunningRow, RunOutcome, RunRow, RunStore } from './types.js';

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

  async admit(run: NewRun, { oneRunPerTick, isGone }: AdmitOptions): Promise<Admission> {
    const values = { ...runValues(run), fleet: oneRunPerTick, now: minuteNow() };
    const [row] = await this.withSchema(() => this.run<AdmitRow>(this.sql.admit, values));
    await this.upgradeIfBehind(row?.version);
    if (row?.id === null || row?.id === undefined) return { admitted: false, reason: 'tick', holder: toHolder(row?.holder) };
    const gone = (row.running ?? []).filter(isGone).map((r) => String(r.id));
    if (gone.length > 0) await this.run(this.sql.abandon, { ids: gone });
    return { admitted: true, runId: Number(row.id) };
  }

  // Tries the advisory lock and, if it is ours and the fleet rule allows, records the run.
  // When another session holds the lock, counts the skip (countSkip) on its run.
  async lockAndAdmit(run: NewRun, key: bigint, oneRunPerTick: boolean, countSkip: boolean): Promise<Admission> {
    const values = { ...runValues(run), fleet: oneRunPerTick, now: minuteNow(), key: key.toString(), count_skip: countSkip };
    const [row] = await this.withSchema(() => this.run<AdmitRow & { got: boolean }>(this.sql.lockAndAdmit, values));
    if (!row?.got) return { admitted: false, reason: 'locked', holder: toHolder(row?.holder) };
    await this.upgradeIfBehind(row.version);
    if (row.id === null) return { admitted: false, reason: 'tick', holder: toHolder(row.holder) };
    return { admitted: true, runId: Number(row.id) };
  }

  async setChildPid(id: number, childPid: number): Promise<void> {
    await this.run(this.sql.setChildPid, { id, child_pid: childPid });
  }

  async finishRun(id: number, o: RunOutcome): Promise<void> {
    await this.run(this.sql.finish, { id, ...outcomeValues({ ...o, finishedAt: o.finishedAt.toISOString() }) });
  }

  // pg_stat_activity hides other roles' session details (backend_start among them) from a
  // role without pg_read_all_stats, so `since` may be unknown.
  async advisoryLocks(): Promise<AdvisoryLock[]> {
    const rows = await this.run<Omit<AdvisoryLock, 'since'> & { backend_start: Date | null }>(this.sql.advisoryLocks, {});
    return rows.map(({ backend_start, ...r }) => ({ ...r, since: backend_start?.toISOString() ?? null }));
  }

  async importRun(record: SpooledRun): Promise<number> {
    const values = { ...runValues(runOf(record)), child_pid: record.childPid, ...outcomeValues(outcomeOf(record)) };
    const [row] = await this.withSchema(() => this.run<{ id: string }>(this.sql.importRun, values));
    return Number(row?.id);
  }

  async recordOverlap(job: string, host: string | null, holderPid: number | null): Promise<Holder | null> {
    const [row] = await this.withSchema(() => this.run<HolderRow>(this.sql.overlap, { job, host, holder_pid: holderPid }));
    return toHolder(row);
  }

  async listRuns(filter: RunFilter): Promise<RunRow[]> {
    const rows = await this.withSchema(() =>
      this.run<PgRow>(this.sql.list, { job: filter.job ?? null, status: filter.status ?? null, limit: filter.limit }),
    );
    return rows.map(toRunRow);
  }

  async getRun(id: number): Promise<RunRow | null> {
    const [row] = await this.withSchema(() => this.run<PgRow>(this.sql.get, { id }));
    return row ? toRunRow(row) : null;
  }

  async latestRun(job: string): Promise<RunRow | null> {
    const [row] = await this.withSchema(() => this.run<PgRow>(this.sql.latest, { job }));
    return row ? toRunRow(row) : null;
  }

  migrate(): Promise<number> {
    return migratePostgres(this.session, this.schema);
  }

  async close(): Promise<void> {
    await this.session.close();
  }

  private run<R extends QueryResultRow>(statement: Statement, values: Record<string, unknown>): Promise<R[]> {
    return this.session.query<R>(statement.text, statement.names.map((name) => values[name]));
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
  running?: RunningRow[];
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

type PgRow = Omit<RunRow, 'id' | 'started_at' | 'finished_at' | 'duration_ms' | 'request_id' | 'tick' | 'invoked_at'> & {
  id: string;
  started_at: Date;
  finished_at: Date | null;
  tick: Date | null;
  invoked_at: Date | null;
  duration_ms: string | null;
  request_id: string | null;
};

// This host's current minute: a claimed tick beyond it came from a clock running ahead.
function minuteNow(): Date {
  return new Date(Math.floor(Date.now() / 60_000) * 60_000);
}

function runValues(run: NewRun): Record<string, unknown> {
  return {
    job: run.job, host: run.host, trigger: run.trigger, attempt: run.attempt, pid: run.pid, username: run.username,
    command: run.command, started_at: run.startedAt, tick: run.tick, lock_backend: run.lockBackend, lock_key: run.lockKey,
    run_key: run.runKey, invoked_at: run.invokedAt, wrapper_start: run.wrapperStart,
  };
}

function outcomeValues(o: StoredOutcome): Record<string, unknown> {
  return {
    status: o.status, finished_at: new Date(o.finishedAt), duration_ms: o.durationMs, exit_code: o.exitCode, signal: o.signal,
    // PostgreSQL text cannot hold NUL bytes.
    output: o.output === null ? null : o.output.replaceAll('\0', ''),
    output_truncated: o.outputTruncated, error: o.error,
  };
}

function toRunRow(row: PgRow): RunRow {
  return {
    ...row,
    id: Number(row.id),
    started_at: row.started_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
    tick: row.tick?.toISOString() ?? null,
    invoked_at: row.invoked_at?.toISOString() ?? null,
    duration_ms: row.duration_ms === null ? null : Number(row.duration_ms),
    request_id: row.request_id === null ? null : Number(row.request_id),
  };
}
