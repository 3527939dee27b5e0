import { hostname } from 'node:os';
import type { RunStore } from '../../store/run-store.js';
import type { RunRow } from '../../store/types.js';
import { sleep } from '../../util/io.js';
import { isSameProcess } from '../../util/process-id.js';
import { DOORBELL } from './stop-listener.js';

// An invocation between two runs: a retry's delay (--retries), a loop's wait for its next run
// (--every, --on-request --for). Its last run has ended, so it has no `running` row, yet its
// wrapper lives on, holds the lock, and will start the command again. `stop NAME` (and
// --replace) used to find "nothing to stop" there while the next attempt was minutes away,
// and --replace skipped on the lock it held. On this host such a wrapper is asked as a
// running one is (a request on its last run, the doorbell); its StopListener ends the
// invocation ("interrupted while waiting to retry", 128+N). Another host's wrapper does not
// look at the log between runs (it polls only while its command runs).

const WRAPPER_POLL_MS = 100;

// The job's invocations on this host that are between runs: the latest row of each living
// wrapper, when that row has ended. `recent` is the job's latest rows, newest first.
export function betweenRuns(recent: readonly RunRow[]): RunRow[] {
  const here = hostname();
  const seen = new Set<string>();
  const found: RunRow[] = [];
  for (const row of recent) {
    const wrapper = `${row.host} ${row.pid} ${row.wrapper_start}`;
    if (seen.has(wrapper)) continue;
    seen.add(wrapper);
    if (row.status !== 'running' && row.host === here && living(row)) found.push(row);
  }
  return found;
}

// Whether `row` (ended, on this host) is its living wrapper's latest run: only then is the
// wrapper between runs of the invocation that recorded it (not a loop's older run).
export async function isBetweenRuns(store: RunStore, row: RunRow): Promise<boolean> {
  if (row.status === 'running' || row.host !== hostname() || !living(row)) return false;
  const recent = await store.listRuns({ jobs: [row.job], limit: 100 });
  return betweenRuns(recent).some((r) => r.id === row.id);
}

// Whether the wrapper that recorded `row` still runs. Only a row that names its wrapper's start
// tells: an ended row's bare pid is most likely another process's by now, which need not be
// rung (a wrapper of an earlier version answers SIGUSR2, which kills most programs).
function living(row: RunRow): boolean {
  return row.wrapper_start !== null && isSameProcess(row.pid, row.wrapper_start);
}

// Asks the wrapper of `row` (between runs, see isBetweenRuns) to stop and waits up to
// `waitMs` for it to be gone. Returns its latest row then (a retry that had just begun is
// stopped by the same request, and recorded killed), or null while it still lives.
export async function stopBetween(store: RunStore, row: RunRow, request: { signal: NodeJS.Signals; by: string }, waitMs: number, abort?: AbortSignal): Promise<RunRow | null> {
  if (!(await store.requestStop(row.id, request, true))) return null;
  try {
    process.kill(row.pid, DOORBELL);
  } catch {
    // Gone meanwhile: its latest row is read below.
  }
  const deadline = Date.now() + waitMs;
  while (living(row)) {
    const left = deadline - Date.now();
    if (left <= 0 || abort?.aborted) return null;
    await sleep(Math.min(WRAPPER_POLL_MS, left), abort);
  }
  const recent = await store.listRuns({ jobs: [row.job], limit: 100 });
  return recent.find((r) => r.host === row.host && r.pid === row.pid && r.wrapper_start === row.wrapper_start) ?? row;
}
