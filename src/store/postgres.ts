import type { PgSession } from '../pg/session.js';
import { migratePostgres, POSTGRES_MIGRATIONS } from './postgres-migrations.js';
import type { SpooledRun } from './spool.js';
import type { NewRun, RunFilter, RunOutcome, RunRow, RunStore } from './types.js';

const ABANDONED = `'wrapper (pid ' || pid || ' on ' || host || ') vanished without recording an outcome'`;
const INSERT_COLUMNS = 'job, status, trigger, attempt, host, pid, username, command, started_at';

// Every PostgreSQL statement of the run log, parameterised; S is the quoted schema.
function statements(S: string) {
  const insertValues = `$1, 'running', $3, $4, $2, $5, $6, $7, $8`;
  return {
    // flock + shared log: insert, and return this host's other running rows to check.
    start: `WITH running AS (SELECT id, pid FROM ${S}.runs WHERE job = $1 AND host = $2 AND status = 'running'),
                 ins AS (INSERT INTO ${S}.runs (${INSERT_COLUMNS}) VALUES (${insertValues}) RETURNING id)
            SELECT (SELECT id FROM ins) AS id,
                   (SELECT coalesce(json_agg(json_build_object('id', id, 'pid', pid)), '[]') FROM running) AS running,
                   (SELECT max(version) FROM ${S}.schema_migrations) AS version`,
    // postgres lock: try the lock and record the outcome in one round trip. Holding the
    // cluster-wide lock proves every other `running` row of the job is stale.
    lockAndStart: `WITH l AS (SELECT pg_try_advisory_lock($9::bigint) AS got),
                 abandoned AS (UPDATE ${S}.runs SET status = 'abandoned', finished_at = now(), error = ${ABANDONED}
                               WHERE job = $1 AND status = 'running' AND (SELECT got FROM l) RETURNING id),
                 ins AS (INSERT INTO ${S}.runs (${INSERT_COLUMNS}) SELECT ${insertValues}
                         WHERE (SELECT got FROM l) RETURNING id),
                 overlap AS (UPDATE ${S}.runs SET "overlaps" = "overlaps" + 1
                             WHERE id = (SELECT max(id) FROM ${S}.runs WHERE job = $1 AND status = 'running')
                               AND $10 AND NOT (SELECT got FROM l) RETURNING id),
                 pending AS (INSERT INTO ${S}.jobs (name, pending_overlaps) SELECT $1, 1
                             WHERE $10 AND NOT (SELECT got FROM l) AND NOT EXISTS (SELECT 1 FROM overlap)
                             ON CONFLICT (name) DO UPDATE SET pending_overlaps = ${S}.jobs.pending_overlaps + 1
                             RETURNING 1)
            SELECT (SELECT got FROM l) AS got, (SELECT id FROM ins) AS id,
                   (SELECT count(*) FROM abandoned) + (SELECT count(*) FROM pending) AS touched,
                   (SELECT max(version) FROM ${S}.schema_migrations) AS version`,
    abandon: `UPDATE ${S}.runs SET status = 'abandoned', finished_at = now(), error = ${ABANDONED}
              WHERE id = ANY($1::bigint[]) AND status = 'running'`,
    setChildPid: `UPDATE ${S}.runs SET child_pid = $2 WHERE id = $1`,
    // Skips that could not see this run's row yet were parked on the job; fold them in.
    finish: `WITH claimed AS (UPDATE ${S}.jobs j SET pending_overlaps = 0 FROM ${S}.jobs old
                              WHERE j.name = (SELECT job FROM ${S}.runs WHERE id = $1) AND old.name = j.name
                                AND old.pending_overlaps > 0
                              RETURNING old.pending_overlaps AS n)
             UPDATE ${S}.runs SET status = $2, finished_at = $3, duration_ms = $4, exit_code = $5, signal = $6,
                    output = $7, output_truncated = $8, error = $9,
                    "overlaps" = "overlaps" + coalesce((SELECT n FROM claimed), 0)
             WHERE id = $1`,
    overlap: `WITH o AS (UPDATE ${S}.runs SET "overlaps" = "overlaps" + 1
                         WHERE id = (SELECT max(id) FROM ${S}.runs
                                     WHERE job = $1 AND status = 'running' AND ($2::text IS NULL OR host = $2))
                         RETURNING id)
              INSERT INTO ${S}.jobs (name, pending_overlaps) SELECT $1, 1 WHERE NOT EXISTS (SELECT 1 FROM o)
              ON CONFLICT (name) DO UPDATE SET pending_overlaps = ${S}.jobs.pending_overlaps + 1`,
    unlock: 'SELECT pg_advisory_unlock($1::bigint)',
    importUpdate: `UPDATE ${S}.runs SET child_pid = coalesce($2, child_pid), status = $3, finished_at = $4,
                     duration_ms = $5, exit_code = $6, signal = $7, output = $8, output_truncated = $9, error = $10
                   WHERE id = $1`,
    importInsert: `INSERT INTO ${S}.runs (job, host, trigger, attempt, pid, username, command, started_at, child_pid,
                     status, finished_at, duration_ms, exit_code, signal, output, output_truncated, error)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
    // Advisory locks held by cronguard sessions; a bigint key is split into classid (high
    // 32 bits) and objid (low 32 bits).
    heldLocks: `SELECT substr(a.application_name, 11) AS job, a.pid AS backend_pid,
                       coalesce(host(a.client_addr), 'local') AS client,
                       ((l.classid::bigint << 32) | l.objid::bigint)::text AS key,
                       r.id AS run_id, r.host, r.pid, coalesce(r.started_at, a.backend_start) AS since
                FROM pg_locks l
                JOIN pg_stat_activity a ON a.pid = l.pid
                LEFT JOIN LATERAL (SELECT id, host, pid, started_at FROM ${S}.runs
                                   WHERE job = substr(a.application_name, 11) AND status = 'running'
                                   ORDER BY id DESC LIMIT 1) r ON true
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                  AND a.application_name LIKE 'cronguard:%'
                ORDER BY since`,
    list: `SELECT * FROM ${S}.runs WHERE ($1::text IS NULL OR job = $1) AND ($2::text IS NULL OR status = $2)
           ORDER BY id DESC LIMIT $3`,
    get: `SELECT * FROM ${S}.runs WHERE id = $1`,
    latest: `SELECT * FROM ${S}.runs WHERE job = $1 ORDER BY id DESC LIMIT 1`,
  };
}

// Errors that mean the schema is missing or older than this code: migrate and try again.
const SCHEMA_MISSING = new Set(['42P01', '3F000', '42703']);

// The shared run log in PostgreSQL. It may share its session with the postgres lock, which
// is what lets one statement take the lock and record the run.
export class PostgresStore implements RunStore {
  private readonly sql: ReturnType<typeof statements>;

  constructor(
    readonly session: PgSession,
    private readonly schema: string,
  ) {
    this.sql = statements(session.escapeIdentifier(schema));
  }

  async startRun(run: NewRun, isAlive: (pid: number) => boolean): Promise<number> {
    const [row] = await this.withSchema(() => this.session.query<StartRow>(this.sql.start, startValues(run)));
    await this.upgradeIfBehind(row?.version);
    const dead = (row?.running ?? []).filter((r) => !isAlive(r.pid)).map((r) => String(r.id));
    if (dead.length > 0) await this.session.query(this.sql.abandon, [dead]);
    return Number(row?.id);
  }

  // Tries the advisory lock and, if it is ours, records the run; returns its id, or null
  // (and, when countOverlap, counts the skip) when another session holds the lock.
  async lockAndStart(run: NewRun, key: bigint, countOverlap: boolean): Promise<number | null> {
    const values = [...startValues(run), key.toString(), countOverlap];
    const [row] = await this.withSchema(() => this.session.query<StartRow & { got: boolean }>(this.sql.lockAndStart, values));
    if (!row?.got) return null;
    await this.upgradeIfBehind(row.version);
    return Number(row.id);
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

  async heldLocks(): Promise<HeldLock[]> {
    const rows = await this.withSchema(() => this.session.query<HeldLock & { run_id: string | null; since: Date }>(this.sql.heldLocks));
    return rows.map((r) => ({ ...r, lock: 'postgres', run_id: r.run_id === null ? null : Number(r.run_id), since: r.since.toISOString() }));
  }

  async importRun(record: SpooledRun): Promise<void> {
    const finish = finishValues(record);
    if (record.id !== null) {
      await this.session.query(this.sql.importUpdate, [record.id, record.childPid, ...finish]);
      return;
    }
    const r = record.run;
    const start = [r.job, r.host, r.trigger, r.attempt, r.pid, r.username, r.command, new Date(r.startedAt)];
    await this.withSchema(() => this.session.query(this.sql.importInsert, [...start, record.childPid, ...finish]));
  }

  async recordOverlap(job: string, host: string | null = null): Promise<void> {
    await this.withSchema(() => this.session.query(this.sql.overlap, [job, host]));
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
      await this.migrate();
      return attempt();
    }
  }

  private async upgradeIfBehind(version: number | null | undefined): Promise<void> {
    if ((version ?? 0) < POSTGRES_MIGRATIONS.length) await this.migrate();
  }
}

// A lock held right now, as `cronguard locks` shows it.
export interface HeldLock {
  job: string;
  lock: string;
  key: string | null;
  host: string | null;
  pid: number | null;
  run_id: number | null;
  since: string | null;
  backend_pid?: number;
  client?: string;
}

interface StartRow {
  id: string | null;
  running: { id: number; pid: number }[];
  version: number | null;
}

type PgRow = Omit<RunRow, 'id' | 'started_at' | 'finished_at' | 'duration_ms' | 'request_id'> & {
  id: string;
  started_at: Date;
  finished_at: Date | null;
  duration_ms: string | null;
  request_id: string | null;
};

// status .. error of a spooled run; one that never finished is recorded abandoned.
function finishValues({ outcome: o }: SpooledRun): unknown[] {
  if (!o) return ['abandoned', new Date(), null, null, null, null, false, 'wrapper vanished before its run could be recorded'];
  const output = o.output === null ? null : o.output.replaceAll('\0', '');
  return [o.status, new Date(o.finishedAt), o.durationMs, o.exitCode, o.signal, output, o.outputTruncated, o.error];
}

function startValues(run: NewRun): unknown[] {
  return [run.job, run.host, run.trigger, run.attempt, run.pid, run.username, run.command, run.startedAt];
}

function toRunRow(row: PgRow): RunRow {
  return {
    ...row,
    id: Number(row.id),
    started_at: row.started_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
    duration_ms: row.duration_ms === null ? null : Number(row.duration_ms),
    request_id: row.request_id === null ? null : Number(row.request_id),
  };
}
