import type { JobStatus, Paused, PauseEvent } from '../jobs.js';
import type { LeaseRow } from '../leases.js';
import type { RequestRow } from '../requests.js';
import { RECENT_RUNS } from '../jobs.js';
import type { RunFilter, RunRow, RunTail, UnsettledRun } from '../types.js';
import { serverErrno } from './errors.js';
import { type MysqlJobStatus, type MysqlRequest, type MysqlRunRow, type RecentRow, toJobStatus, toRequestRow, toRunRow } from './rows.js';
import { listRunsParams, listRunsSql } from './sql-reads.js';
import { fleetPauseOf, pauseEventsOf } from './pause.js';
import { MysqlBase } from './store-base.js';

// No such table: a log from before leases (migration 0002), read by a reader that may not upgrade it.
const NO_TABLE = 1146;
// MySQL's "unknown system variable" (MariaDB has no @@server_uuid).
const UNKNOWN_VARIABLE = 1193;

// What the run log in MySQL answers without changing anything: runs, jobs and requests, for
// the subcommands, the web page and a run deciding what to do.
export abstract class MysqlReads extends MysqlBase {
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
}
