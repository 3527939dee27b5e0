import type { JobStatus } from './jobs.js';
import type { RunStore } from './run-store.js';
import type { LeaseRow } from './types.js';

// A job's lease (-l lease) as `status` and the web page show it: its holder, its epoch (the
// holder's fencing token), since when it is held and when it expires unless renewed.
export interface JobLease {
  readonly host: string;
  readonly pid: number;
  readonly run_id: number | null;
  readonly epoch: string;
  readonly since: string;
  readonly expires_at: string;
  readonly expires_in_ms: number;
}

export type LeasedJobStatus = JobStatus & { readonly lease: JobLease | null };

export function jobLease(row: LeaseRow): JobLease {
  return {
    host: row.host, pid: row.pid, run_id: row.run_id === null ? null : Number(row.run_id), epoch: row.epoch,
    since: row.acquired_at.toISOString(), expires_at: row.expires_at.toISOString(), expires_in_ms: Number(row.expires_in_ms),
  };
}

// The jobs with the lease each holds now, read in one more statement; none where the store
// keeps no leases (SQLite, a PostgreSQL schema from before them).
export async function withLeases(store: RunStore, jobs: readonly JobStatus[]): Promise<LeasedJobStatus[]> {
  const rows = jobs.length > 0 && store.leases ? await store.leases() : [];
  const byJob = new Map(rows.map((r) => [r.job, jobLease(r)]));
  return jobs.map((j) => ({ ...j, lease: byJob.get(j.job) ?? null }));
}

// One line: "host pid 123, run 45, epoch 6, expires in 20s".
export function leaseText(l: JobLease): string {
  return `${l.host} pid ${l.pid}${l.run_id === null ? '' : `, run ${l.run_id}`}, epoch ${l.epoch}, expires in ${Math.ceil(l.expires_in_ms / 1000)}s`;
}
