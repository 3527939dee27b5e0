import { join } from 'node:path';
import Database from 'better-sqlite3';
import { loadAddon } from '../../util/addon.js';
import { EMBEDDED_LOG_FILE } from '../../util/paths.js';
import { preparePrivateDirectory } from '../../util/safe-path.js';
import { monotonicMs } from '../../util/time.js';
import type { Admission, AdmitOptions, Holder } from '../admission.js';
import { type HolderRow, toHolder } from '../admission.js';
import { type Holding, type JobStatus, type JobStatusRow, jobStatusOf, type Paused, type PauseEvent, type RecentRun } from '../jobs.js';
import { type Cancellation, type NewRequest, type RequestRow, requestStatusOf, type SettledRequest, type Unserved } from '../requests.js';
import type { RunStore } from '../run-store.js';
import { outcomeOf, RunKeyTaken, rekeyed, runOf, type SpooledRun } from '../spool-record.js';
import { type AlertClaim, type NewRun, PRUNE_BATCH, type PruneOptions, type PruneResult, type RunFilter, type RunOutcome, type RunRow, type RunTail, type StopRequest, type UnsettledRun } from '../types.js';
import { admitIn } from './admit.js';
import { patiently, patientStore, SYNC_WAIT_MS } from './busy.js';
import { withClaimsSettled } from './claims.js';
import { prepareSqliteFiles } from './files.js';
import { migrateSqlite } from './migrations.js';
import { fleetPauseAt, pauseEventsIn, setPauseIn } from './pause.js';
import { outcomeParams, type RequestRecord, type Row, runParams, toRequestRow, toRunRow } from './rows.js';
import { listRunsSql, SQL } from './sql.js';

// The addon by its file: better-sqlite3's own lookup (`bindings`) probes a dozen paths per start.
const sqliteAddon = (): object => loadAddon('better-sqlite3', 'build/Release/better_sqlite3.node');

// The embedded run log: one SQLite file in WAL mode, private to the user (0600), or shared
// with the group of root's shared state directory (0660).
export class SqliteStore implements RunStore {
  private constructor(private readonly db: Database.Database) {}

  // Opened, and every statement retried while another writer holds the file, without
  // stopping the process (see busy.ts).
  static async open(stateDir: string): Promise<SqliteStore> {
    const gid = preparePrivateDirectory(stateDir, 'state directory');
    prepareSqliteFiles(stateDir, gid);
    const file = join(stateDir, EMBEDDED_LOG_FILE);
    const db = new Database(file, {
      timeout: SYNC_WAIT_MS,
      // Its types say a path; it takes the loaded addon too (lib/database.js).
      nativeBinding: sqliteAddon() as unknown as string,
    });
    try {
      await patiently(() => {
        db.pragma('journal_mode = WAL');
        db.pragma('synchronous = NORMAL');
        migrateSqlite(db);
      });
    } catch (error) {
      db.close();
      throw error;
    }
    return patientStore(new SqliteStore(db), ['prune']);
  }

  // For `serve --read-only`: an existing log, opened without a single write (no file
  // created, no migration), so that a log the server may only read still serves pages.
  static openReadOnly(stateDir: string): SqliteStore {
    const db = new Database(join(stateDir, EMBEDDED_LOG_FILE), {
      readonly: true,
      fileMustExist: true,
      timeout: 10_000,
      // Its types say a path; it takes the loaded addon too (lib/database.js).
      nativeBinding: sqliteAddon() as unknown as string,
    });
    return new SqliteStore(db);
  }

  async admit(run: NewRun, options: AdmitOptions): Promise<Admission> {
    return admitIn(this.db, run, options, runParams);
  }

  async setChildPid(id: number, childPid: number, command: string): Promise<void> {
    this.db.prepare(SQL.setChildPid).run(childPid, command, id);
  }

  async requestStop(id: number, stop: StopRequest, between = false): Promise<boolean> {
    return this.db.prepare(SQL.requestStop).run({ id, signal: stop.signal, by: stop.by, at: new Date().toISOString(), between: between ? 1 : 0 }).changes > 0;
  }

  async stopRequest(id: number): Promise<StopRequest | null> {
    return (this.db.prepare(SQL.stopRequest).get(id) as StopRequest | undefined) ?? null;
  }

  async amendError(id: number, error: string): Promise<void> {
    this.db.prepare(SQL.amendError).run(error, id);
  }

  async finishRun(id: number, o: RunOutcome, final: boolean): Promise<boolean> {
    const { db } = this;
    const finishedAt = o.finishedAt.toISOString();
    db.transaction(() => {
      db.prepare(SQL.finishRun).run({ id, ...outcomeParams({ ...o, finishedAt }) });
      if (final) db.prepare(SQL.finishRequests).run({ id, status: requestStatusOf(o.status), finished_at: finishedAt, exit_code: o.exitCode });
    }).immediate();
    return false;
  }

  async wantAlert(job: string, failing: boolean, runId: number | null, token: string, forMs: number): Promise<AlertClaim | null> {
    const { db } = this;
    return db.transaction(() => {
      db.prepare(SQL.alertWanted).run({ job, failing: failing ? 1 : 0, run: runId });
      return this.claimAlert(job, token, forMs);
    }).immediate();
  }

  async alertSent(job: string, token: string, delivered: boolean | null, forMs: number): Promise<AlertClaim | null> {
    const { db } = this;
    return db.transaction(() => {
      if (delivered === null) {
        db.prepare(SQL.alertFreed).run({ job, token });
        return null;
      }
      db.prepare(SQL.alertDelivered).run({ job, token, failing: delivered ? 1 : 0, now: new Date().toISOString() });
      return this.claimAlert(job, token, forMs);
    }).immediate();
  }

  private claimAlert(job: string, token: string, forMs: number): AlertClaim | null {
    const now = Date.now();
    const row = this.db.prepare(SQL.alertClaim).get({ job, token, now: new Date(now).toISOString(), until: new Date(now + forMs).toISOString() }) as { failing: number; run_id: number | null } | undefined;
    return row ? { failing: row.failing === 1, runId: row.run_id } : null;
  }

  async settleRequests(runId: number, settled: readonly SettledRequest[]): Promise<void> {
    const now = new Date().toISOString();
    this.db.transaction(() => {
      for (const r of settled) this.db.prepare(SQL.settleRequest).run({ id: r.id, run_id: runId, status: r.status, now, exit_code: r.exitCode, error: r.error });
    }).immediate();
  }

  async returnRequests(runId: number, u: Unserved): Promise<void> {
    const { db } = this;
    db.transaction(() => {
      db.prepare(SQL.requestsLater).run({ run_id: runId, ids: JSON.stringify(u.later) });
      db.prepare(SQL.requestsRefused).run({ run_id: runId, ids: JSON.stringify(u.refused), now: new Date().toISOString(), reason: u.reason });
    }).immediate();
  }

  async startRetry(previous: number, run: NewRun): Promise<number> {
    const { db } = this;
    return db
      .transaction(() => {
        const request = (db.prepare(SQL.firstRequestOf).get(previous) as { id: number | null }).id;
        const id = Number(db.prepare(SQL.insertRun).run({ ...runParams(run), overlaps: 0, request_id: request }).lastInsertRowid);
        db.prepare(SQL.retryRequests).run({ run_id: id, previous });
        return id;
      })
      .immediate();
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

  async recordBlocked(job: string, by: string): Promise<void> {
    this.db.prepare(SQL.blocked).run({ job, by, at: new Date().toISOString() });
  }

  async setHolding(job: string, h: Holding | null): Promise<void> {
    this.db.prepare(SQL.holding).run({ job, host: h?.host ?? null, pid: h?.pid ?? null, until: h?.until ?? null, lock: h?.lock ?? null, key: h?.key ?? null });
  }

  // Under the record's run key, or, when that names another run's row, the key made from it.
  async importRun(record: SpooledRun): Promise<number> {
    for (const runKey of [record.run.runKey, rekeyed(record)]) {
      const params = { ...runParams({ ...runOf(record), runKey }), child_pid: record.childPid, ...outcomeParams(outcomeOf(record)) };
      const row = this.db.prepare(SQL.importRun).get(params) as { id: number } | undefined;
      if (row) return withClaimsSettled(this.db, row.id, record);
      const owner = this.db.prepare(SQL.keyOwner).get(params) as { id: number; same: number } | undefined;
      if (owner?.same) return withClaimsSettled(this.db, owner.id, record);
    }
    throw new RunKeyTaken(record.run.runKey);
  }

  async listRuns(filter: RunFilter): Promise<RunRow[]> {
    const params = {
      jobs: JSON.stringify(filter.jobs ?? []), status: filter.status, host: filter.host, slot: filter.slot, since: filter.since, before_id: filter.beforeId,
      limit: filter.limit,
    };
    const sql = listRunsSql(filter);
    // better-sqlite3 refuses named parameters the statement does not use.
    const used = Object.fromEntries(Object.entries(params).filter(([name]) => sql.includes(`@${name}`)));
    return (this.db.prepare(sql).all(used) as Row[]).map(toRunRow);
  }

  async getRun(id: number): Promise<RunRow | null> {
    const row = this.db.prepare(SQL.getRun).get(id) as Row | undefined;
    return row ? toRunRow(row) : null;
  }

  async runTail(id: number, chars: number): Promise<RunTail | null> {
    const row = this.db.prepare(SQL.runTail).get({ id, chars }) as (Row & { output_cut: number }) | undefined;
    return row ? { ...toRunRow(row), output_cut: row.output_cut === 1 } : null;
  }

  async latestRun(job: string): Promise<RunRow | null> {
    const row = this.db.prepare(SQL.latestRun).get(job) as Row | undefined;
    return row ? toRunRow(row) : null;
  }

  async addRequest(r: NewRequest): Promise<number> {
    const params = { job: r.job, args: JSON.stringify(r.args), not_before: r.notBefore.toISOString(), requested_by: r.requestedBy };
    return (this.db.prepare(SQL.addRequest).get(params) as { id: number }).id;
  }

  async cancelRequest(id: number): Promise<Cancellation> {
    if (this.db.prepare(SQL.cancelRequest).get({ id, now: new Date().toISOString() })) return { cancelled: true };
    return { cancelled: false, status: (await this.getRequest(id))?.status ?? 'missing' };
  }

  async getRequest(id: number): Promise<RequestRow | null> {
    const row = this.db.prepare(SQL.getRequest).get(id) as RequestRecord | undefined;
    return row ? toRequestRow(row) : null;
  }

  async listRequests(job: string | null, limit: number): Promise<RequestRow[]> {
    return (this.db.prepare(SQL.listRequests).all({ job, limit }) as RequestRecord[]).map(toRequestRow);
  }

  async hasDueRequest(job: string): Promise<boolean> {
    return this.db.prepare(SQL.hasDueRequest).get(job, new Date().toISOString()) !== undefined;
  }

  async unsettledRuns(job: string): Promise<UnsettledRun[]> { return this.db.prepare(SQL.unsettledRuns).all({ job }) as UnsettledRun[]; }

  // Pauses (pause.ts): the job's own, the fleet's, their events.
  async setPaused(job: string, paused: Paused | null, by: string, at: string): Promise<void> { setPauseIn(this.db, job, paused, by, at); }
  async setFleetPause(paused: Paused | null, by: string, at: string): Promise<boolean> { return setPauseIn(this.db, null, paused, by, at); }
  async fleetPause(): Promise<Paused | null> { return fleetPauseAt(this.db, new Date().toISOString()); }
  async pauseEvents(job: string, limit: number): Promise<PauseEvent[]> { return pauseEventsIn(this.db, job, limit); }

  async setSchedule(job: string, schedule: string | null): Promise<void> {
    if (schedule === null) this.db.prepare(SQL.unschedule).run(job);
    else this.db.prepare(SQL.schedule).run({ job, schedule });
  }

  async jobStatus(job: string | null): Promise<JobStatus[]> {
    type Raw = Omit<JobStatusRow, 'disabled' | 'recent' | 'runs_total'> & { disabled: number; recent: string; runs_total: string | null };
    const now = new Date().toISOString();
    const rows = this.db.prepare(SQL.jobStatus).all({ job, now }) as Raw[];
    const fleet = fleetPauseAt(this.db, now);
    return rows.map((r) =>
      jobStatusOf({
        ...r,
        disabled: r.disabled === 1,
        recent: (JSON.parse(r.recent) as (Omit<RecentRun, 'retried'> & { retried: number })[]).reverse().map((x) => ({ ...x, retried: x.retried === 1 })),
        runs_total: r.runs_total === null ? {} : (JSON.parse(r.runs_total) as Record<string, number>),
      }, fleet),
    );
  }

  // Batch by batch, each tried again on its own while the file is busy: a batch deleted is
  // counted once, however often a later one is tried (patientStore leaves prune to this).
  async prune({ before, keep, deadline }: PruneOptions): Promise<PruneResult> {
    const cutoff = before.toISOString();
    const bound = (this.db.prepare(SQL.pruneBound).get(cutoff) as { id: number | null }).id ?? 0;
    const deleteRuns = this.db.prepare(SQL.pruneRuns);
    let runs = 0;
    let after = 0;
    for (;;) {
      if (monotonicMs() >= deadline) return { runs, requests: 0, complete: false };
      const gone = (await patiently(() => deleteRuns.all({ after, bound, cutoff, keep, batch: PRUNE_BATCH }))) as { id: number }[];
      if (gone.length === 0) break;
      runs += gone.length;
      after = Math.max(...gone.map((g) => g.id));
    }
    let requests = 0;
    for (let n = -1; n !== 0 && monotonicMs() < deadline; requests += n) {
      n = (await patiently(() => this.db.prepare(SQL.pruneRequests).run({ cutoff, batch: PRUNE_BATCH }))).changes;
    }
    return { runs, requests, complete: monotonicMs() < deadline };
  }

  async claimTask(task: string, everyMs: number): Promise<boolean> {
    const now = Date.now();
    const due = new Date(now - everyMs).toISOString();
    return this.db.prepare(SQL.claimTask).get({ task, now: new Date(now).toISOString(), due }) !== undefined;
  }

  async releaseTask(task: string): Promise<void> {
    this.db.prepare(SQL.releaseTask).run(task);
  }

  async migrate(): Promise<number> {
    return migrateSqlite(this.db);
  }

  async close(): Promise<void> { this.db.close(); }
}
