import type { QueryResultRow } from 'pg';
import { describe, NotFoundError, PermissionError, UsageError } from '../../errors.js';
import { printable } from '../../util/printable.js';
import { monotonicMs } from '../../util/time.js';
import { type Admission, type AdmitOptions, type Holder, type HolderRow, toHolder } from '../admission.js';
import type { Holding, JobStatus, Paused, PauseEvent } from '../jobs.js';
import { type Cancellation, claimedRequest, claimsOf, type NewRequest, type RequestRow, requestStatusOf, type SettledRequest, type Unserved } from '../requests.js';
import type { LockedAdmission, SchemaMemory, ServerLock, SharedStore } from '../shared.js';
import { outcomeOf, RecordRefused, RunKeyTaken, rekeyed, runOf, type SpooledRun } from '../spool-record.js';
import type { LeaseRow } from '../types.js';
import { type AlertClaim, type LockRelease, type LockRequest, type NewRun, PRUNE_BATCH, type PruneOptions, type PruneResult, type RunFilter, type RunningRow, type RunOutcome, type RunRow, type RunTail, type StopRequest, type UnsettledRun } from '../types.js';
import { isDataError } from './config.js';
import { advisoryKey, sharedBackend } from './lock.js';
import { appliedVersion, migratePostgres, POSTGRES_SCHEMA_VERSION, schemaState } from './migrations.js';
import type { Statement } from './named-params.js';
import { type AdmitResult, type AdvisoryLock, minuteNow, outcomeValues, type PgJobStatus, type PgRequest, type PgRow, runJson, runValues, scheduleRefusal, toJobStatus, toPaused, toPauseEvent, toRequestRow, toRunRow } from './rows.js';
import type { PgSession } from './session.js';
import { listRunsStatement, statements } from './sql.js';

export type { AdvisoryLock } from './rows.js';

// Errors that mean the schema is missing or older than this code (a table, a schema, a
// column, a function): migrate and try again.
const SCHEMA_MISSING = new Set(['42P01', '3F000', '42703', '42883']);

// The shared run log in PostgreSQL. It may share its session with the postgres lock, which
// is what lets one statement take the lock and record the run.
export class PostgresStore implements SharedStore {
  // What every PostgreSQL store statement goes through: the dialect's statements for its
  // schema, and a schema created or upgraded when the session finds it missing or behind.
  private readonly sql: ReturnType<typeof statements>;
  private readonly S: string;
  // The schema was checked (or is remembered) current for this session.
  private checked = false;

  // `create`: a missing schema is created on first use (runs, migrate); a reader (history,
  // logs, locks) must not create one as a side effect of looking, say in a mistyped schema.
  constructor(
    readonly session: PgSession,
    private readonly schema: string,
    private readonly create = true,
    private readonly memory: SchemaMemory | null = null,
  ) {
    this.S = session.escapeIdentifier(schema);
    this.sql = statements(this.S);
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

  // Before the first statement that names the schema: a statement naming a missing schema
  // fails, and the server logs an ERROR for it (DBAs alert on those), so the session asks
  // first, in statements that cannot fail. A run asks once per host and schema version: the
  // memory spares later runs the round trip. A schema dropped afterwards still fails a
  // statement, which migrates and retries as before.
  private async withSchema<T>(attempt: () => Promise<T>): Promise<T> {
    // A schema this host remembers current is not awaited: the statement goes out at once,
    // before whatever its caller does while the server works (the run's spare watchdog).
    if (!this.checked && this.memory?.current) this.checked = true;
    if (!this.checked) await this.check();
    try {
      return await attempt();
    } catch (error) {
      if (!SCHEMA_MISSING.has((error as { code?: string }).code ?? '')) throw error;
      this.memory?.forget();
      if (!this.create) throw this.missing();
      await this.migrate();
      return attempt();
    }
  }

  private async check(): Promise<void> {
    if (this.memory?.current) {
      this.checked = true;
      return;
    }
    const state = await schemaState(this.session, this.schema);
    if (!this.create && !state.present) throw this.missing();
    if (!this.create && !state.usable) {
      throw Object.assign(new Error(`permission denied for schema ${this.schema}`), { code: '42501' });
    }
    const version = await appliedVersion(this.session, this.S, state);
    // A reader reads what is there; a role that may not upgrade the schema runs on it as it is.
    if (this.create && version < POSTGRES_SCHEMA_VERSION && (!state.present || state.owner)) await this.migrate();
    this.checked = true;
    if (this.create && (version >= POSTGRES_SCHEMA_VERSION || !state.present || state.owner)) this.memory?.remember();
  }

  private missing(): NotFoundError {
    return new NotFoundError(`no run log in schema ${this.schema} at ${this.session.db.display} (nothing was recorded there)`);
  }

  // After a statement that worked: a schema behind this code is upgraded, best effort, by a
  // role that may (migrate() says why it may not without sending a statement that fails). The
  // statement that needs the new schema fails, migrates and retries on its own (withSchema).
  private async upgradeIfBehind(version: number | null | undefined): Promise<void> {
    if ((version ?? 0) < POSTGRES_SCHEMA_VERSION) {
      this.memory?.forget();
      await this.migrate().catch(() => {});
    }
  }

  // What the run log in PostgreSQL answers without changing anything: runs, jobs, requests,
  // locks and leases, for the subcommands, the web page and a run deciding what to do.
  // Leases held now; none in a schema from before leases (migration 0014).
  async leases(): Promise<LeaseRow[]> {
    return this.run<LeaseRow>(this.sql.leases, {}).catch((error) => {
      if ((error as { code?: string }).code === '42P01') return [];
      throw error;
    });
  }

  async listRequests(job: string | null, limit: number): Promise<RequestRow[]> {
    return (await this.withSchema(() => this.run<PgRequest>(this.sql.listRequests, { job, limit }))).map(toRequestRow);
  }

  async hasDueRequest(job: string): Promise<boolean> {
    return (await this.run(this.sql.hasDueRequest, { job })).length > 0;
  }

  async unsettledRuns(job: string): Promise<UnsettledRun[]> { return (await this.run<UnsettledRun>(this.sql.unsettledRuns, { job })).map((r) => ({ ...r, id: Number(r.id) })); }

  async jobStatus(job: string | null): Promise<JobStatus[]> {
    const rows = await this.withSchema(() => this.run<PgJobStatus>(this.sql.jobStatus, { job }));
    const fleet = await this.fleetPause();
    return rows.map((r) => toJobStatus(r, fleet));
  }

  async fleetPause(): Promise<Paused | null> {
    const [row] = await this.withSchema(() => this.run(this.sql.fleetPause, {}));
    return row ? toPaused(row, true) : null;
  }

  async pauseEvents(job: string, limit: number): Promise<PauseEvent[]> {
    return (await this.withSchema(() => this.run(this.sql.pauseEvents, { job, limit }))).map(toPauseEvent);
  }

  // Advisory locks of cronguard sessions in this database. pg_stat_activity hides other
  // roles' session details (backend_start among them) from a role without
  // pg_read_all_stats, so `since` may be unknown.
  async databaseLocks(): Promise<ServerLock[]> {
    const rows = await this.run<Omit<AdvisoryLock, 'since'> & { backend_start: Date | null }>(this.sql.advisoryLocks, {});
    return rows.map((r) => ({
      lock: 'postgres', key: r.key, job: r.job, jobsOwn: advisoryKey(r.job, this.schema).toString() === r.key,
      holder: r.backend_pid, client: r.client, since: r.backend_start?.toISOString() ?? null,
    }));
  }

  async listRuns(filter: RunFilter): Promise<RunRow[]> {
    const values = { ...filter, before_id: filter.beforeId };
    return (await this.withSchema(() => this.run<PgRow>(listRunsStatement(this.S, filter), values))).map(toRunRow);
  }

  async getRun(id: number): Promise<RunRow | null> {
    return (await this.withSchema(() => this.run<PgRow>(this.sql.get, { id }))).map(toRunRow)[0] ?? null;
  }

  async runTail(id: number, chars: number): Promise<RunTail | null> {
    return (await this.withSchema(() => this.run<PgRow & { output_cut: boolean }>(this.sql.tail, { id, chars }))).map((r) => toRunRow(r) as RunTail)[0] ?? null;
  }

  async latestRun(job: string): Promise<RunRow | null> {
    return (await this.withSchema(() => this.run<PgRow>(this.sql.latest, { job }))).map(toRunRow)[0] ?? null;
  }

  private identity: string | null = null;
  // Told the server's identity once it is known (the spool keys records by it).
  onIdentity: ((systemIdentifier: string) => void) | null = null;
  // No session state (a lease's run): no LISTEN, which a transaction pooler would leave on a
  // server connection other clients get; a loop waiting for requests polls instead.
  sessionless = false;

  async admit(run: NewRun, options: AdmitOptions): Promise<Admission> {
    return (await this.admission(run, options, null, false)).admission;
  }

  // Tries the lock (the advisory lock, or a lease by compare-and-set) and, if it is ours and
  // the rules allow, records the run, in one round trip. When another holds the lock, counts
  // the skip (countSkip) on its run. Refuses (69) when the server backend already held the
  // advisory lock (see sharedBackend); says on which backend the lock was taken and whether
  // it is held now, and a lease's epoch.
  async lockAndAdmit(run: NewRun, lock: LockRequest, options: AdmitOptions, countSkip: boolean): Promise<LockedAdmission> {
    return this.admission(run, options, lock, countSkip);
  }

  // `abandoned`: this host's runs given another N that an admission before this one found in
  // its way and abandoned (see slotHolderGone).
  private async admission(run: NewRun, options: AdmitOptions, lock: LockRequest | null, countSkip: boolean, abandoned: ReadonlySet<number> = new Set()): Promise<LockedAdmission> {
    if (lock?.kind === 'named') throw new Error('a GET_LOCK name is MySQL\'s; PostgreSQL locks by key');
    const taking =
      lock === null ? {}
      : lock.kind === 'advisory' ? { key: lock.key.toString(), count_skip: countSkip, ...this.ownBackend() }
      : { lease: lock.key.toString(), lease_ttl_ms: lock.ttlMs, count_skip: countSkip };
    const p = {
      ...runJson(run),
      ...taking,
      fleet: options.oneRunPerTick,
      now: minuteNow().toISOString(),
      min_interval_ms: options.minIntervalMs,
      ...(options.spacingMs === null ? {} : { spacing_ms: options.spacingMs }),
      on_request: options.onRequest,
      batch: options.batch,
      batch_max: options.batchMax,
      manual: options.manual,
      keep_lock: options.keepLock,
      ...(options.scheduled === null ? {} : { scheduled: true, zone: options.scheduled.zone, early: options.scheduled.early }),
    };
    type Row = {
      r: AdmitResult;
      orphaned: RunningRow[];
      backend: number;
      backend_start: string | null;
      holding: boolean;
      epoch: string | null;
      started_at: Date | null;
      system_identifier: string;
    };
    let sentAt = 0;
    const [row] = await this.withSchema(() => {
      sentAt = monotonicMs();
      return this.run<Row>(this.sql.admit, { p: JSON.stringify(p) });
    });
    const r = row?.r as AdmitResult;
    this.identified(row?.system_identifier ?? null);
    // The server's clock when the lock was taken (a schema before migration 0023: the run's own).
    const startedAt = row?.started_at ?? run.startedAt;
    if (r.reason === 'reentered') throw sharedBackend(this.session.db.display);
    const epoch = row?.epoch == null ? null : BigInt(row.epoch);
    const locked = { backend: row?.backend ?? 0, backendStart: row?.backend_start ?? null, holding: row?.holding === true, epoch, sentAt };
    await this.upgradeIfBehind(r.version);
    // This host's rows of the job under other locks, whose wrappers only this host can
    // check: as the embedded log does, whatever the verdict; and so the claims of such runs
    // that ended (see settle_claims).
    const gone = (r.running ?? []).filter((g) => options.isGone(g, run)).map((g) => String(g.id));
    if (gone.length > 0) await this.run(this.sql.abandon, { ids: gone });
    const orphaned = (row?.orphaned ?? []).filter((o) => options.isGone(o, run)).map((o) => String(o.id));
    if (orphaned.length > 0) await this.run(this.sql.settleClaims, { ids: orphaned });
    if (!r.admitted) {
      const stale = slotHolderGone(r, run, options, abandoned);
      if (stale !== null) {
        // Refused for a copy of this host given another N whose wrapper is gone: admit() cannot
        // ask this host's processes (slot_disagreement). Abandoned, the admission is asked again.
        if (!gone.includes(String(stale))) await this.run(this.sql.abandon, { ids: [String(stale)] });
        return this.admission(run, options, lock, countSkip, new Set([...abandoned, stale]));
      }
      const refused = { admitted: false, reason: r.reason, holder: toHolder(r.holder), lastStartedAt: r.last_started_at ?? undefined, paused: r.disabled ? toPaused(r.disabled as unknown as Record<string, unknown>, r.disabled.fleet === true) : undefined, ...scheduleRefusal(r, options.scheduled, startedAt.getTime()), ...(r.reason === 'slots' ? { maxRunning: r.max_running ?? 1 } : {}) } as const;
      return { ...locked, admission: refused };
    }
    const requests = r.requests.map((q) => claimedRequest(Number(q.id), q.args));
    return { ...locked, admission: { admitted: true, runId: Number(r.id), requests, ...(row?.started_at ? { startedAt: row.started_at } : {}) } };
  }

  // The backend this session started, while the session holds no lock: admit() then knows
  // that the backend holds none either, and spares asking pg_locks (migration 0027).
  private ownBackend(): { backend?: number } {
    const { startedBackend, lockBackend } = this.session;
    return startedBackend !== null && lockBackend === null ? { backend: startedBackend } : {};
  }

  // The session holds its lock on the server backend it started itself (no pooler between).
  private onOwnBackend(): boolean {
    const { startedBackend, lockBackend } = this.session;
    return startedBackend !== null && lockBackend === startedBackend;
  }

  // The server's system identifier (see Spool), asked only when not known yet: the admission
  // tells it for free. Null when this role may not read it.
  async serverIdentity(): Promise<string | null> {
    if (this.identity === null) {
      const [row] = await this.run<{ system_identifier: string }>(this.sql.systemIdentifier, {}).catch(() => []);
      this.identified(row?.system_identifier ?? null);
    }
    return this.identity;
  }

  async holdsRun(runKey: string): Promise<boolean> {
    return (await this.withSchema(() => this.run(this.sql.holdsRun, { run_key: runKey }))).length > 0;
  }

  private identified(identity: string | null): void {
    if (identity === null || identity === this.identity) return;
    this.identity = identity;
    this.onIdentity?.(identity);
  }

  async setChildPid(id: number, childPid: number, command: string): Promise<void> {
    await this.run(this.sql.setChildPid, { id, child_pid: childPid, command });
  }

  async requestStop(id: number, stop: StopRequest, between = false): Promise<boolean> {
    return (await this.withSchema(() => this.run(this.sql.requestStop, { id, signal: stop.signal, by: stop.by, between }))).length > 0;
  }

  // Asked every few seconds while a command runs: one probe, never a migration.
  async stopRequest(id: number): Promise<StopRequest | null> {
    return (await this.run<StopRequest>(this.sql.stopRequest, { id }))[0] ?? null;
  }

  async amendError(id: number, error: string): Promise<void> {
    await this.withSchema(() => this.run(this.sql.amendError, { id, error }));
  }

  async finishRun(id: number, o: RunOutcome, final: boolean, unlock: LockRelease | null = null): Promise<boolean> {
    if (unlock?.kind === 'named') throw new Error('a GET_LOCK name is MySQL\'s; PostgreSQL locks by key');
    const p = JSON.stringify({ id, final, schema: this.schema, request_status: requestStatusOf(o.status), ...outcomeValues({ ...o, finishedAt: o.finishedAt.toISOString() }) });
    const [row] = await this.withSchema(() =>
      unlock?.kind === 'lease'
        ? this.run<{ unlocked: boolean }>(this.sql.finishLease, { p, key: unlock.key.toString(), epoch: unlock.epoch.toString() })
        : this.run<{ unlocked: boolean }>(this.onOwnBackend() ? this.sql.finishOnOwnBackend : this.sql.finish, { p, unlock: unlock?.key.toString() ?? null, backend: this.session.lockBackend }),
    );
    return row?.unlocked === true;
  }

  // Renews a lease this holder took (its epoch) for `ttlMs` more: false when it is no longer
  // this holder's (expired, broken, taken over).
  async renewLease(key: bigint, epoch: bigint, ttlMs: number): Promise<boolean> {
    return (await this.run(this.sql.renewLease, { key: key.toString(), epoch: epoch.toString(), ttl_ms: ttlMs })).length > 0;
  }

  async releaseLease(key: bigint, epoch: bigint): Promise<void> {
    await this.run(this.sql.releaseLease, { key: key.toString(), epoch: epoch.toString() });
  }

  async wantAlert(job: string, failing: boolean, runId: number | null, token: string, forMs: number): Promise<AlertClaim | null> {
    await this.withSchema(() => this.run(this.sql.alertWanted, { job, failing, run: runId }));
    return this.claimAlert(job, token, forMs);
  }

  // Two statements, not one transaction: the claim is a compare-and-set of its own, and
  // another invocation's outcome or claim between them changes only who says what next.
  async alertSent(job: string, token: string, delivered: boolean | null, forMs: number): Promise<AlertClaim | null> {
    if (delivered === null) {
      await this.run(this.sql.alertFreed, { job, token });
      return null;
    }
    await this.run(this.sql.alertDelivered, { job, token, failing: delivered });
    return this.claimAlert(job, token, forMs);
  }

  private async claimAlert(job: string, token: string, forMs: number): Promise<AlertClaim | null> {
    const [row] = await this.run<{ failing: boolean; run_id: string | null }>(this.sql.alertClaim, { job, token, for_ms: forMs });
    return row ? { failing: row.failing, runId: row.run_id === null ? null : Number(row.run_id) } : null;
  }

  async returnRequests(runId: number, u: Unserved): Promise<void> {
    await this.run(this.sql.giveBack, { run_id: runId, later: u.later, refused: u.refused, reason: u.reason, schema: this.schema });
  }

  async settleRequests(runId: number, settled: readonly SettledRequest[]): Promise<void> {
    await this.run(this.sql.settleRequests, {
      run_id: runId,
      ids: settled.map((r) => r.id),
      statuses: settled.map((r) => r.status),
      exit_codes: settled.map((r) => r.exitCode),
      errors: settled.map((r) => r.error),
    });
  }

  async startRetry(previous: number, run: NewRun): Promise<number> {
    const [row] = await this.run<{ id: string }>(this.sql.retry, { ...runValues(run), previous });
    return Number(row?.id);
  }

  async addRequest(r: NewRequest): Promise<number> {
    const values = { job: r.job, args: r.args, not_before: r.notBefore, requested_by: r.requestedBy };
    const [row] = await this.withSchema(() => this.run<{ id: string }>(this.sql.addRequest, values));
    return Number(row?.id);
  }

  async cancelRequest(id: number): Promise<Cancellation> {
    const [row] = await this.withSchema(() => this.run(this.sql.cancelRequest, { id }));
    if (row) return { cancelled: true };
    return { cancelled: false, status: (await this.getRequest(id))?.status ?? 'missing' };
  }

  async getRequest(id: number): Promise<RequestRow | null> {
    return (await this.withSchema(() => this.run<PgRequest>(this.sql.getRequest, { id }))).map(toRequestRow)[0] ?? null;
  }

  async listenForRequests(job: string, wake: () => void): Promise<void> {
    if (this.sessionless) return;
    await this.session.listen('cronguard_requests', (payload) => payload === `${this.schema}:${job}` && wake());
  }

  get connectionLost(): boolean {
    return this.session.connectionLost;
  }

  answerWithin(ms: number): void {
    this.session.answerWithin(ms);
  }

  async allowRequests(role: string): Promise<string> {
    await (await import('./grants.js')).allowRequests(this.session, this.schema, role);
    return `role ${role} may write requests and schedules and read the run log in schema ${this.schema}`;
  }

  async setPaused(job: string, paused: Paused | null, by: string, at: string): Promise<void> {
    const values = paused ? { job, reason: paused.reason, since: paused.since, by: paused.by, until: paused.until ?? null } : { job, at, by };
    await this.withSchema(() => this.run(paused ? this.sql.pause : this.sql.resume, values));
  }

  async setFleetPause(paused: Paused | null, by: string, at: string): Promise<boolean> {
    const values = paused ? { reason: paused.reason, since: paused.since, by: paused.by, until: paused.until ?? null } : { at, by };
    return (await this.withSchema(() => this.run(paused ? this.sql.pauseFleet : this.sql.resumeFleet, values))).length > 0;
  }

  async setSchedule(job: string, schedule: string | null): Promise<void> {
    try {
      await this.withSchema(() => this.run(schedule === null ? this.sql.unschedule : this.sql.schedule, { job, schedule }));
    } catch (error) {
      // set_schedule() refuses it (22023), with its reason.
      if ((error as { code?: string }).code === '22023') {
        throw new UsageError(`PostgreSQL's set_schedule() refuses it: ${printable((error as Error).message).replace(/^schedule: /, '')}`);
      }
      throw error;
    }
  }

  // Under the record's run key, or, when that names another run's row, the key made from it.
  async importRun(record: SpooledRun): Promise<number> {
    try {
      for (const runKey of [record.run.runKey, rekeyed(record)]) {
        const values = { ...runValues({ ...runOf(record), runKey }), child_pid: record.childPid, ...outcomeValues(outcomeOf(record)) };
        const [row] = await this.withSchema(() => this.run<{ id: string }>(this.sql.importRun, values));
        const [owner] = row ? [{ ...row, same: true }] : await this.run<{ id: string; same: boolean }>(this.sql.keyOwner, values);
        if (owner?.same) return await this.withClaimsSettled(Number(owner.id), record);
      }
    } catch (error) {
      throw isDataError(error) ? new RecordRefused(describe(error)) : error;
    }
    throw new RunKeyTaken(record.run.runKey);
  }

  // After a spooled record's row is written (its id): its claims settled as it says.
  private async withClaimsSettled(id: number, record: SpooledRun): Promise<number> {
    const claims = claimsOf(record);
    if (claims) await this.run(this.sql.deliveredClaims, { ...claims, id, finished_at: claims.finishedAt, exit_code: claims.exitCode });
    return id;
  }

  async recordOverlap(job: string, host: string | null, holderPid: number | null): Promise<Holder | null> {
    return toHolder((await this.withSchema(() => this.run<HolderRow>(this.sql.overlap, { job, host, holder_pid: holderPid })))[0]);
  }

  async recordBlocked(job: string, by: string): Promise<void> {
    await this.withSchema(() => this.run(this.sql.blocked, { job, by }));
  }

  async setHolding(job: string, h: Holding | null): Promise<void> {
    await this.withSchema(() => this.run(this.sql.holding, { job, host: h?.host ?? null, pid: h?.pid ?? null, until: h?.until ?? null, lock: h?.lock ?? null, key: h?.key ?? null }));
  }

  async prune({ before, keep, deadline }: PruneOptions): Promise<PruneResult> {
    const [bound] = await this.withSchema(() => this.run<{ id: string; may_delete: boolean }>(this.sql.pruneBound, { cutoff: before }));
    if (!bound?.may_delete) {
      throw new PermissionError(`PostgreSQL at ${this.session.db.display}: prune needs DELETE on ${this.schema}.runs and ${this.schema}.requests (run it as the schema's owner)`);
    }
    const values = { bound: bound?.id, cutoff: before, keep, batch: PRUNE_BATCH };
    let runs = 0;
    let after = '0';
    for (;;) {
      if (monotonicMs() >= deadline) return { runs, requests: 0, complete: false };
      const gone = await this.run<{ id: string }>(this.sql.pruneRuns, { ...values, after });
      if (gone.length === 0) break;
      runs += gone.length;
      after = gone.reduce((max, g) => (BigInt(g.id) > BigInt(max) ? g.id : max), after);
    }
    let requests = 0;
    for (let n = -1; n !== 0 && monotonicMs() < deadline; requests += n) {
      n = (await this.run(this.sql.pruneRequests, { cutoff: before, batch: PRUNE_BATCH })).length;
    }
    return { runs, requests, complete: monotonicMs() < deadline };
  }

  async claimTask(task: string, everyMs: number): Promise<boolean> {
    return (await this.withSchema(() => this.run(this.sql.claimTask, { task, every_s: everyMs / 1000 }))).length > 0;
  }

  async releaseTask(task: string): Promise<void> {
    await this.run(this.sql.releaseTask, { task });
  }
}

// The id of the run a 'slots' refusal names when it is this host's and its wrapper is gone
// (which only this host can tell), and no admission before this one abandoned it; else null.
function slotHolderGone(r: AdmitResult, run: NewRun, options: AdmitOptions, abandoned: ReadonlySet<number>): number | null {
  const h = r.reason === 'slots' ? r.holder : null;
  if (!h || h.host !== run.host || abandoned.has(Number(h.id))) return null;
  const row: RunningRow = { id: Number(h.id), pid: h.pid, wrapper_start: h.wrapper_start ?? null, lock_backend: h.lock_backend ?? null, lock_key: h.lock_key ?? null };
  return options.isGone(row, run) ? row.id : null;
}
