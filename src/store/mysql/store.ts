import { NotFoundError } from '../../errors.js';
import { monotonicMs } from '../../util/time.js';
import { type Admission, type AdmitOptions, type Holder, type HolderRow, keepsLock } from '../admission.js';
import { type Holding, type JobStatus, type Paused, type PauseEvent, RECENT_RUNS } from '../jobs.js';
import { type Cancellation, type NewRequest, type RequestRow, requestStatusOf, type SettledRequest, type Unserved } from '../requests.js';
import type { LockedAdmission, SchemaMemory, ServerLock, SharedStore } from '../shared.js';
import type { SpooledRun } from '../spool-record.js';
import type { AlertClaim, LeaseRow, LockRelease, LockRequest, NewRun, PruneOptions, PruneResult, RunFilter, RunOutcome, RunRow, RunTail, StopRequest, UnsettledRun } from '../types.js';
import { type AdmissionLock, type Admitted, admitIn, heldDisagreement } from './admit.js';
import { isRetryableTransaction, serverErrno } from './errors.js';
import { heldMysqlLocks } from './held-locks.js';
import { admitLeased } from './lease-admit.js';
import { appliedVersion, MYSQL_SCHEMA_VERSION, migrateMysql } from './migrations.js';
import { fleetPauseOf, pauseEventsOf, setPauseIn } from './pause.js';
import { type MysqlJobStatus, type MysqlRequest, type MysqlRunRow, outcomeParams, type RecentRow, runParams, toHolder, toJobStatus, toRequestRow, toRunRow } from './rows.js';
import type { Changed, MysqlSession, Statement } from './session.js';
import { LOCK_SQL, quoteName, runSql } from './sql.js';
import { listRunsParams, listRunsSql, pauseSql, readSql } from './sql-reads.js';
import { importRecord } from './store-import.js';
import { allowRequests, claimTask, pruneLog } from './store-upkeep.js';

// Errors that mean the log is missing or older than this code: no such table (1146),
// database (1049) or column (1054). Migrate and try again.
const SCHEMA_MISSING = new Set([1146, 1049, 1054]);
// A statement on its own (autocommit) that met a deadlock or a lock wait timeout was rolled
// back whole: it is sent again, this many times in all (as the session's transactions are).
const STATEMENT_TRIES = 4;

// No such table: a log from before leases (migration 0002), read by a reader that may not upgrade it.
const NO_TABLE = 1146;
// MySQL's "unknown system variable" (MariaDB has no @@server_uuid).
const UNKNOWN_VARIABLE = 1193;

// The shared run log in a MySQL or MariaDB database. It may share its session with the
// GET_LOCK lock: the admission is then asked right after the lock is taken, on that session.
export class MysqlStore implements SharedStore {
  // What every MySQL store statement goes through: the dialect's statements for its database,
  // and the tables created or upgraded when the session finds them missing or behind.
  private readonly sql: ReturnType<typeof runSql>;
  private readonly reads: ReturnType<typeof readSql>;
  private readonly pauses: ReturnType<typeof pauseSql>;
  // The log was checked (or is remembered) current for this session.
  private checked = false;

  // `create`: a missing log is created on first use (runs, migrate); a reader (history,
  // logs, locks) must not create one as a side effect of looking, say in a mistyped database.
  constructor(
    readonly session: MysqlSession,
    private readonly database: string,
    private readonly create = true,
    private readonly memory: SchemaMemory | null = null,
  ) {
    const D = quoteName(database);
    this.sql = runSql(D);
    this.reads = readSql(D);
    this.pauses = pauseSql(D);
  }

  get D(): string {
    return quoteName(this.database);
  }

  migrate(): Promise<number> {
    return migrateMysql(this.session, this.database);
  }

  async close(): Promise<void> {
    await this.session.close();
  }

  // Before the first statement: a run asks once per host and schema version (the memory
  // spares later runs the round trip). Tables dropped afterwards still fail a statement,
  // which migrates and tries again.
  private async withSchema<T>(attempt: () => Promise<T>): Promise<T> {
    if (!this.checked) await this.check();
    try {
      return await attempt();
    } catch (error) {
      if (!SCHEMA_MISSING.has(serverErrno(error) ?? 0)) throw error;
      this.memory?.forget();
      if (!this.create) throw this.missing();
      await this.migrate();
      return attempt();
    }
  }

  // One statement that writes, outside a transaction, sent again on a deadlock or a lock
  // wait timeout rather than failing the run's record.
  private async write(sql: string, params: readonly unknown[]): Promise<Changed> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.session.execute(sql, params);
      } catch (error) {
        if (attempt >= STATEMENT_TRIES || !isRetryableTransaction(error) || this.session.lost) throw error;
      }
    }
  }

  private async check(): Promise<void> {
    if (this.memory?.current) {
      this.checked = true;
      return;
    }
    const version = await appliedVersion(this.session, this.database);
    if (!this.create && version === 0) throw this.missing();
    if (this.create && version < MYSQL_SCHEMA_VERSION) await this.migrate();
    this.checked = true;
    if (this.create) this.memory?.remember();
  }

  private missing(): NotFoundError {
    // MySQL hides a database from a user with no privilege on it: absent and unreadable look alike.
    const where = `database ${this.database} at ${this.session.config.display}`;
    return new NotFoundError(`no run log in ${where} (nothing was recorded there, or this user may not read it: see Grants in man cronguard)`);
  }

  // What the run log in MySQL answers without changing anything: runs, jobs and requests, for
  // the subcommands, the web page and a run deciding what to do.
  private identity: string | null = null;
  // Told the server's identity once it is known (the spool keys records by it).
  onIdentity: ((identity: string) => void) | null = null;

  async listRuns(filter: RunFilter): Promise<RunRow[]> {
    const rows = await this.withSchema(() => this.session.query<MysqlRunRow>(listRunsSql(this.D, filter), listRunsParams(filter)));
    return rows.map(toRunRow);
  }

  async getRun(id: number): Promise<RunRow | null> {
    const [row] = await this.withSchema(() => this.session.query<MysqlRunRow>(this.reads.getRun, [id]));
    return row ? toRunRow(row) : null;
  }

  async runTail(id: number, chars: number): Promise<RunTail | null> {
    const [row] = await this.withSchema(() => this.session.query<MysqlRunRow & { output_cut: number }>(this.reads.runTail, [chars, chars, id]));
    return row ? { ...toRunRow(row), output_cut: Number(row.output_cut) === 1 } : null;
  }

  async latestRun(job: string): Promise<RunRow | null> {
    const [row] = await this.withSchema(() => this.session.query<MysqlRunRow>(this.reads.latestRun, [job]));
    return row ? toRunRow(row) : null;
  }

  async getRequest(id: number): Promise<RequestRow | null> {
    const [row] = await this.withSchema(() => this.session.query<MysqlRequest>(this.reads.getRequest, [id]));
    return row ? toRequestRow(row) : null;
  }

  async listRequests(job: string | null, limit: number): Promise<RequestRow[]> {
    return (await this.withSchema(() => this.session.query<MysqlRequest>(this.reads.listRequests, [job, job, limit]))).map(toRequestRow);
  }

  async hasDueRequest(job: string): Promise<boolean> {
    return (await this.withSchema(() => this.session.query(this.reads.hasDueRequest, [job]))).length > 0;
  }

  async unsettledRuns(job: string): Promise<UnsettledRun[]> {
    const rows = await this.withSchema(() => this.session.query<UnsettledRun>(this.sql.unsettled, [job, job]));
    return rows.map((r) => ({ ...r, id: Number(r.id) }));
  }

  // Leases held now; none in a log from before them.
  async leases(): Promise<LeaseRow[]> {
    return this.withSchema(() =>
      this.session.query<LeaseRow>(this.reads.leases).catch((error) => {
        if (serverErrno(error) === NO_TABLE) return [];
        throw error;
      }),
    );
  }

  // Two statements: the jobs, then their recent runs (MySQL has no LATERAL to fold them in).
  async jobStatus(job: string | null): Promise<JobStatus[]> {
    const [rows, recent] = await this.withSchema(async () => [
      await this.session.query<MysqlJobStatus>(this.reads.jobStatus, [job, job]),
      await this.session.query<RecentRow>(this.reads.recentRuns, [RECENT_RUNS - 1, job, job]),
    ] as const);
    const byJob = new Map<string, RecentRow[]>();
    for (const r of recent) {
      const runs = byJob.get(r.job);
      if (runs) runs.push(r);
      else byJob.set(r.job, [r]);
    }
    const fleet = await this.fleetPause();
    return rows.map((r) => toJobStatus(r, byJob.get(r.job) ?? [], fleet));
  }

  async fleetPause(): Promise<Paused | null> {
    return this.withSchema(() => fleetPauseOf(this.session, this.pauses));
  }

  async pauseEvents(job: string, limit: number): Promise<PauseEvent[]> {
    return this.withSchema(() => pauseEventsOf(this.session, this.pauses, job, limit));
  }

  // The server's identity for the spool: MySQL's @@server_uuid, else (MariaDB) its
  // server_id and host name. Null when it cannot be asked.
  async serverIdentity(): Promise<string | null> {
    if (this.identity !== null) return this.identity;
    const uuid = await this.session.query<{ uuid: string }>(this.reads.serverUuid).then(
      ([row]) => row?.uuid ?? null,
      async (error) => {
        if (serverErrno(error) !== UNKNOWN_VARIABLE) return null;
        const [row] = await this.session.query<{ server_id: number; hostname: string }>(this.reads.identity).catch(() => []);
        return row ? `mariadb:${row.hostname}:${row.server_id}` : null;
      },
    );
    if (uuid !== null) {
      this.identity = uuid;
      this.onIdentity?.(uuid);
    }
    return this.identity;
  }

  async admit(run: NewRun, options: AdmitOptions): Promise<Admission> {
    // No GET_LOCK asked: there is always an admission.
    const { admission } = await this.withSchema(() => admitIn(this.session, this.sql, run, options));
    return admission as Admission;
  }

  // GET_LOCK(name, 0) and, if it is ours, the admission, on this store's session: asked in
  // the admission's first packet (admitIn). When another session holds it, the skip is
  // counted (countSkip) on its run, unless that run was given another --max-running: that
  // is refused as the disagreement it is, which no free slot of this N would find when all
  // are held. A refusal frees the lock, but an idle or early loop (keepLock) keeps it to wait
  // for work.
  async lockAndAdmit(run: NewRun, lock: LockRequest, options: AdmitOptions, countSkip: boolean): Promise<LockedAdmission> {
    if (lock.kind === 'lease') return this.leaseAndAdmit(run, lock, options, countSkip);
    if (lock.kind !== 'named') throw new Error(`a MySQL log takes a named lock (GET_LOCK) or a lease, not ${lock.kind}`);
    const { name } = lock;
    const locked = { backend: this.session.connectionId, backendStart: null, epoch: null };
    const sentAt = monotonicMs();
    // Kept across the tries of withSchema, which migrates and runs the admission again.
    const asked: AdmissionLock = { name, asked: false };
    let admitted: Admitted;
    try {
      admitted = await this.withSchema(() => admitIn(this.session, this.sql, run, options, asked));
    } catch (error) {
      // Freed if this admission took it; a failure before GET_LOCK answered leaves nothing to free.
      if (asked.asked && !this.session.lost) await this.session.query(LOCK_SQL.releaseTaken, [name]).catch(() => {});
      throw error;
    }
    const { got, admission } = admitted;
    if (admission === null) {
      const holder = 'holder' in admitted ? admitted.holder : undefined;
      const slots = await heldDisagreement(this.session, this.sql, run, options, holder);
      if (slots) return { ...locked, sentAt, holding: false, admission: slots };
      if (countSkip) await this.withSchema(() => this.write(holder ? this.sql.countSkip : this.sql.park, holder ? [holder.id] : [run.job]));
      return { ...locked, sentAt, holding: false, admission: { admitted: false, reason: 'locked', holder: toHolder(holder) } };
    }
    // A name this session held before (2) stays held; one it took now admitIn freed after its COMMIT unless kept.
    return { ...locked, sentAt, holding: got === 2 || keepsLock(admission, options), admission };
  }

  // -l lease: taken in the admission's transaction (lease-admit.ts). Its expiry counts from
  // when that transaction began (after the log was checked current, which may migrate).
  private async leaseAndAdmit(run: NewRun, lock: LockRequest & { kind: 'lease' }, options: AdmitOptions, countSkip: boolean): Promise<LockedAdmission> {
    let sentAt = monotonicMs();
    const { admission, epoch } = await this.withSchema(() => {
      sentAt = monotonicMs();
      return admitLeased(this.session, this.sql, run, options, { key: lock.key, ttlMs: lock.ttlMs, countSkip });
    });
    return { backend: this.session.connectionId, backendStart: null, epoch, sentAt, holding: epoch !== null, admission };
  }

  // Renews a lease this holder took (its epoch) for `ttlMs` more: false when it is no longer
  // its own (expired, taken over, broken). The table exists: the lease was taken from it.
  async renewLease(key: bigint, epoch: bigint, ttlMs: number): Promise<boolean> {
    const params = [ttlMs, key.toString(), epoch.toString()];
    return (await this.session.outside(() => this.session.execute(this.sql.renewLease, params))).affectedRows > 0;
  }

  async releaseLease(key: bigint, epoch: bigint): Promise<void> {
    await this.session.outside(() => this.write(this.sql.releaseLease, [key.toString(), epoch.toString()]));
  }

  async setChildPid(id: number, childPid: number, command: string): Promise<void> {
    await this.withSchema(() => this.write(this.sql.setChildPid, [childPid, command, id]));
  }

  async requestStop(id: number, stop: StopRequest, between = false): Promise<boolean> {
    const params = [stop.signal, stop.by, id, between, stop.signal, stop.by];
    return (await this.withSchema(() => this.write(this.sql.requestStop, params))).affectedRows > 0;
  }

  // Asked every few seconds while a command runs: one probe, never a migration.
  async stopRequest(id: number): Promise<StopRequest | null> {
    const [row] = await this.session.query<StopRequest>(this.sql.stopRequest, [id]);
    return row ?? null;
  }

  async amendError(id: number, error: string): Promise<void> {
    await this.withSchema(() => this.write(this.sql.amendError, [error, id]));
  }

  // The outcome, with the skips parked on the job folded in (read under the row lock), the
  // finished status counted, and on the last attempt its requests ended. A lease is let go
  // in the same transaction, a GET_LOCK (`unlock`) after the commit: whoever takes either
  // next finds this row finished. Two round trips: BEGIN and the locking read; the writes,
  // COMMIT and RELEASE_LOCK. Returns whether the lock was still this holder's.
  async finishRun(id: number, o: RunOutcome, final: boolean, unlock: LockRelease | null = null): Promise<boolean> {
    const { sql, session } = this;
    const finishedAt = o.finishedAt;
    const name = unlock?.kind === 'named' ? unlock.name : null;
    const lease = unlock?.kind === 'lease' ? unlock : null;
    return this.withSchema(() =>
      session.batchedTransaction(async () => {
        const [, locked] = await session.batch([['BEGIN', []], [sql.finishLock, [id]]]);
        const [run] = (locked?.rows ?? []) as { job: string; status: string; parked: number; claims: number }[];
        const writes: Statement[] = [];
        if (run) {
          const parked = Number(run.parked);
          if (parked > 0) writes.push([sql.unpark, [run.job]]);
          writes.push([sql.finish, [...outcomeParams({ ...o, finishedAt: finishedAt.toISOString() }, session.maxPacketBytes), parked, id]]);
          if (run.status !== o.status) writes.push(...this.recounts(run.job, run.status, o.status));
          if (final && Number(run.claims) === 1) writes.push([sql.finishRequests, [requestStatusOf(o.status), finishedAt, o.exitCode, id]]);
        }
        if (lease) writes.push([sql.releaseLease, [lease.key.toString(), lease.epoch.toString()]]);
        writes.push(['COMMIT', []]);
        if (name !== null) writes.push([LOCK_SQL.released, [name]]);
        const answers = await session.batch(writes);
        if (lease) return (answers.at(-2)?.affectedRows ?? 0) > 0;
        return name !== null && (answers.at(-1)?.rows[0] as { released: number | null } | undefined)?.released === 1;
      }),
    );
  }

  // run_counts follows a row's status from `from` to `to` (as PostgreSQL's trigger does).
  private recounts(job: string, from: string | null, to: string): Statement[] {
    const statements: Statement[] = [];
    if (from !== null && from !== 'running') statements.push([this.sql.uncount, [job, from]]);
    if (to !== 'running') statements.push([this.sql.count, [job, to, 1, 1]]);
    return statements;
  }

  private async recount(t: MysqlStore['session'], job: string, from: string | null, to: string): Promise<void> {
    for (const [statement, params] of this.recounts(job, from, to)) await t.execute(statement, params);
  }

  async wantAlert(job: string, failing: boolean, runId: number | null, token: string, forMs: number): Promise<AlertClaim | null> {
    const { sql } = this;
    await this.withSchema(async () => {
      // A job whose first invocation could not start its command (127) has no row yet.
      await this.write(sql.lockJob, [job]);
      await this.write(sql.alertWanted, [failing ? 1 : 0, runId, job]);
    });
    return this.claimAlert(job, token, forMs);
  }

  // Statements of their own, not one transaction: the claim is a compare-and-set of its own,
  // and another invocation's outcome or claim between them changes only who says what next.
  async alertSent(job: string, token: string, delivered: boolean | null, forMs: number): Promise<AlertClaim | null> {
    if (delivered === null) {
      await this.write(this.sql.alertFreed, [job, token]);
      return null;
    }
    await this.write(this.sql.alertDelivered, [delivered ? 1 : 0, job, token]);
    return this.claimAlert(job, token, forMs);
  }

  private async claimAlert(job: string, token: string, forMs: number): Promise<AlertClaim | null> {
    if ((await this.write(this.sql.alertClaim, [token, forMs, job])).affectedRows !== 1) return null;
    const [row] = await this.session.query<{ failing: number; run_id: number | string | null }>(this.sql.alertClaimed, [job, token]);
    return row ? { failing: Number(row.failing) === 1, runId: row.run_id === null ? null : Number(row.run_id) } : null;
  }

  async settleRequests(runId: number, settled: readonly SettledRequest[]): Promise<void> {
    await this.withSchema(() =>
      this.session.transaction(async (t) => {
        for (const r of settled) await t.execute(this.sql.settleRequest, [r.status, r.exitCode, r.error, r.id, runId]);
      }),
    );
  }

  async returnRequests(runId: number, u: Unserved): Promise<void> {
    await this.withSchema(() =>
      this.session.transaction(async (t) => {
        if (u.later.length > 0) await t.execute(this.sql.requestsLater(u.later.length), [runId, ...u.later]);
        if (u.refused.length > 0) await t.execute(this.sql.requestsRefused(u.refused.length), [u.reason, runId, ...u.refused]);
      }),
    );
  }

  async startRetry(previous: number, run: NewRun): Promise<number> {
    return this.withSchema(() =>
      this.session.transaction(async (t) => {
        const [first] = await t.query<{ id: number | null }>(this.sql.firstRequestOf, [previous]);
        const { insertId } = await t.execute(this.sql.insertRun, [first?.id ?? null, ...runParams(run)]);
        await t.execute(this.sql.moveRequests, [insertId, previous]);
        return insertId;
      }),
    );
  }

  // A skip for a held lock, on the run that holds it: the running row (on `host` only, for
  // a local lock), else the latest run of the wrapper that took a local lock (holderPid);
  // else parked on the job for its holder's outcome.
  async recordOverlap(job: string, host: string | null, holderPid: number | null): Promise<Holder | null> {
    const { sql } = this;
    return this.withSchema(async () => {
      let [holder] = await this.session.query<HolderRow>(host === null ? sql.runningHolder : sql.runningHolderOn, host === null ? [job] : [job, host]);
      if (!holder && host !== null && holderPid !== null) [holder] = await this.session.query<HolderRow>(sql.pidHolder, [job, host, holderPid]);
      if (holder) await this.write(sql.countSkip, [holder.id]);
      else await this.write(sql.park, [job]);
      return toHolder(holder);
    });
  }

  async recordBlocked(job: string, by: string): Promise<void> {
    await this.withSchema(() => this.write(this.sql.blocked, [job, by, by]));
  }

  async setHolding(job: string, h: Holding | null): Promise<void> {
    const values = [h?.host ?? null, h?.pid ?? null, h ? new Date(h.until) : null, h?.lock ?? null, h?.key ?? null];
    await this.withSchema(() => this.write(this.sql.holding, [job, ...values, ...values]));
  }

  async importRun(record: SpooledRun): Promise<number> {
    return this.withSchema(() => importRecord(this.session, this.sql, record, (t, job, from, to) => this.recount(t, job, from, to)));
  }

  async holdsRun(runKey: string): Promise<boolean> {
    return (await this.withSchema(() => this.session.query(this.sql.holdsRun, [runKey]))).length > 0;
  }

  async addRequest(r: NewRequest): Promise<number> {
    const params = [r.job, JSON.stringify(r.args), r.notBefore, r.requestedBy];
    return (await this.withSchema(() => this.write(this.reads.addRequest, params))).insertId;
  }

  async cancelRequest(id: number): Promise<Cancellation> {
    if ((await this.withSchema(() => this.write(this.reads.cancelRequest, [id]))).affectedRows > 0) return { cancelled: true };
    return { cancelled: false, status: (await this.getRequest(id))?.status ?? 'missing' };
  }

  async setPaused(job: string, paused: Paused | null, by: string, at: string): Promise<void> {
    await this.withSchema(() => setPauseIn(this.session, this.pauses, job, paused, by, at));
  }

  async setFleetPause(paused: Paused | null, by: string, at: string): Promise<boolean> {
    return this.withSchema(() => setPauseIn(this.session, this.pauses, null, paused, by, at));
  }

  async setSchedule(job: string, schedule: string | null): Promise<void> {
    await this.withSchema(() => this.write(schedule === null ? this.reads.unschedule : this.reads.schedule, schedule === null ? [job] : [job, schedule, schedule]));
  }

  async prune(options: PruneOptions): Promise<PruneResult> {
    return this.withSchema(() => pruneLog(this.session, this.reads, options));
  }

  async claimTask(task: string, everyMs: number): Promise<boolean> {
    return this.withSchema(() => claimTask(this.session, this.reads, task, everyMs));
  }

  async releaseTask(task: string): Promise<void> {
    await this.withSchema(() => this.write(this.reads.releaseTask, [task]));
  }

  get connectionLost(): boolean {
    return this.session.connectionLost;
  }

  answerWithin(ms: number): void {
    this.session.answerWithin(ms);
  }

  // The GET_LOCK names of this log's jobs held now (cronguard locks).
  databaseLocks(): Promise<ServerLock[]> {
    return heldMysqlLocks(this.session, this.database);
  }

  async allowRequests(role: string): Promise<string> {
    await allowRequests(this.session, this.database, role);
    return `user or role ${role} may write requests and schedules and read the run log in database ${this.database}`;
  }
}
