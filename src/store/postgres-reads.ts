import { advisoryKey } from '../lock/postgres.js';
import { PostgresBase } from './postgres-base.js';
import { type AdvisoryLock, type PgJobStatus, type PgRequest, type PgRow, toJobStatus, toPaused, toPauseEvent, toRequestRow, toRunRow } from './postgres-rows.js';
import { listRunsStatement } from './postgres-sql.js';
import type { JobStatus, Paused, PauseEvent } from './jobs.js';
import type { RequestRow } from './requests.js';
import type { LeaseRow } from './leases.js';
import type { ServerLock } from './shared.js';
import type { RunFilter, RunRow, RunTail, UnsettledRun } from './types.js';

// What the run log in PostgreSQL answers without changing anything: runs, jobs, requests,
// locks and leases, for the subcommands, the web page and a run deciding what to do.
export abstract class PostgresReads extends PostgresBase {
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
}
