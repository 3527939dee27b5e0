import { onThisMachine } from '../lock/lock-spec.js';
import type { JobStatus } from './jobs.js';
import type { RunStore } from './run-store.js';
import type { RunRow } from './types.js';

// A running copy of a job run with --max-running, as `status` and the web page show it: the
// slot of the job's lock it holds, and who it is.
export interface SlotHolder {
  readonly slot: number;
  readonly host: string;
  readonly pid: number;
  readonly run_id: number;
  readonly since: string;
}

// A job whose running copies were given --max-running N > 1: N, and who holds which slot
// (by slot); `running.length` of `max_running` run now. `per_host`: the slots are lock files,
// each host's own, so N is a bound on each host (a fleet of them sharing only the log).
export interface JobSlots {
  readonly max_running: number;
  readonly per_host: boolean;
  readonly running: readonly SlotHolder[];
}

export type SlottedJobStatus = JobStatus & { readonly slots?: JobSlots };

// Most running rows read: a job has at most 64 slots, a fleet of local locks a set per host.
const RUNNING_READ = 10_000;

// The jobs, each that runs with --max-running N > 1 with its slots; the others as they were
// (no `slots`), so a job without it reads as it always did. One more statement, only when
// some job runs.
export async function withSlots<J extends JobStatus>(store: RunStore, jobs: readonly J[]): Promise<(J & { readonly slots?: JobSlots })[]> {
  if (!jobs.some((j) => j.running_run_id !== null)) return [...jobs];
  const only = jobs.length === 1 ? [(jobs[0] as J).job] : undefined;
  const rows = await store.listRuns({ jobs: only, status: 'running', limit: RUNNING_READ });
  const byJob = new Map<string, RunRow[]>();
  for (const r of rows) byJob.set(r.job, [...(byJob.get(r.job) ?? []), r]);
  return jobs.map((j) => {
    const slots = slotsOf(byJob.get(j.job) ?? []);
    return slots === null ? j : { ...j, slots };
  });
}

// A row from before slots (NULL) held slot 0 of 1. Of two rows of one slot on one host, only
// the newer can hold it: the other's wrapper vanished and was not yet marked abandoned.
function slotsOf(running: readonly RunRow[]): JobSlots | null {
  const maxRunning = Math.max(1, ...running.map((r) => r.max_running ?? 1));
  if (maxRunning === 1) return null;
  const newest = new Map<string, RunRow>();
  for (const r of running) {
    const at = `${r.host}\0${r.slot ?? 0}`;
    if ((newest.get(at)?.id ?? -1) < r.id) newest.set(at, r);
  }
  const holders = [...newest.values()].map((r) => ({ slot: r.slot ?? 0, host: r.host, pid: r.pid, run_id: r.id, since: r.started_at }));
  const perHost = running.every((r) => onThisMachine(r.lock_backend));
  return { max_running: maxRunning, per_host: perHost, running: holders.sort((a, b) => a.slot - b.slot || a.host.localeCompare(b.host)) };
}

// "2 of 3 running"; with slots of each host's own, on several hosts: "4 running: 2 of 3 on
// web1, 2 of 3 on web2".
export function slotsText(s: JobSlots): string {
  const hosts = [...new Set(s.running.map((h) => h.host))].sort();
  if (!s.per_host || hosts.length < 2) return `${s.running.length} of ${s.max_running} running`;
  const each = hosts.map((host) => `${s.running.filter((h) => h.host === host).length} of ${s.max_running} on ${host}`);
  return `${s.running.length} running: ${each.join(', ')}`;
}
