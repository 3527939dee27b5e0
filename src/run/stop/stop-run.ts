import { readdirSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { PermissionError } from '../../errors.js';
import type { RunStore } from '../../store/run-store.js';
import type { RunRow } from '../../store/types.js';
import { formatDuration } from '../../util/duration.js';
import { sleep } from '../../util/io.js';
import { isSameProcess } from '../../util/process-id.js';
import { ProcessGroup } from '../supervisor/group.js';
import { DOORBELL } from './stop-listener.js';

// Stopping a running run (cronguard stop, --replace), wherever it runs. The request goes in
// the run log, where the run's wrapper reads it (see StopListener) and stops its command's
// whole process group itself, with the job's own --kill-after, and records who stopped it.
// On this host the wrapper is told at once (the doorbell); on another it finds the request
// within STOP_POLL_MS. A wrapper that is gone (SIGKILLed) while its command's group lives
// on, on this host, is stood in for: the group is stopped here and the run recorded.

export interface StopOrder {
  readonly signal: NodeJS.Signals;
  // Who asked, as the run's `error` will say: "alice@web1 (cronguard stop)".
  readonly by: string;
  // For a group whose wrapper is gone: SIGKILL after this long (the wrapper's kill-after is
  // its own, unknown here).
  readonly killAfterMs: number;
  // Whether the log is shared with other hosts (their wrappers poll it).
  readonly shared: boolean;
}

export type Stopping =
  // The run ended (its row as it ended).
  | { readonly state: 'ended'; readonly row: RunRow }
  // Still running when the wait ran out (asked, and told where it could be).
  | { readonly state: 'running'; readonly row: RunRow }
  // It was not running when asked, or cannot be reached: `why` says so in words.
  | { readonly state: 'not-running'; readonly row: RunRow; readonly why: string };

// Asks `row`'s run to stop and waits up to `waitMs` (Infinity: until it ends) for its end;
// an aborted `abort` (a signal to the asking invocation) ends the wait as if it ran out.
export async function stopRun(store: RunStore, row: RunRow, order: StopOrder, waitMs: number, abort?: AbortSignal): Promise<Stopping> {
  const here = row.host === hostname();
  if (!here && !order.shared) {
    return { state: 'not-running', row, why: `run ${row.id} runs on ${row.host}, which shares no run log with this host; stop it there` };
  }
  // Another user's wrapper on this host cannot be told: said before anything is stored.
  if (here && mayNotSignal(row.pid)) throw new PermissionError(`run ${row.id} of ${row.job} belongs to another user's cronguard (pid ${row.pid}); stop it as that user or root`);
  // The log keeps at most 300 characters of who (a proxy's user name may be longer).
  const by = [...order.by].slice(0, 300).join('');
  if (!(await store.requestStop(row.id, { signal: order.signal, by }))) {
    // Ended, but its invocation may go on (a retry's delay, a loop's wait): see stop-between.ts.
    const between = await import('./stop-between.js');
    if (!(await between.isBetweenRuns(store, (await store.getRun(row.id)) ?? row))) return notRunning(store, row);
    const last = await between.stopBetween(store, row, { signal: order.signal, by }, waitMs, abort);
    return last === null ? { state: 'running', row } : { state: 'ended', row: last };
  }
  if (here && !isSameProcess(row.pid, row.wrapper_start)) return standIn(store, row, order);
  if (here) ring(row.pid);
  return waitForEnd(store, row, waitMs, here ? order : null, abort);
}

async function notRunning(store: RunStore, row: RunRow): Promise<Stopping> {
  const now = (await store.getRun(row.id)) ?? row;
  return { state: 'not-running', row: now, why: `run ${row.id} of ${row.job} is not running (${now.status}); nothing to stop` };
}

function mayNotSignal(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function ring(pid: number): void {
  try {
    process.kill(pid, DOORBELL);
  } catch {
    // Gone since it was looked at: its end is what waitForEnd waits for.
  }
}

// Polls the run's row until it has ended, or the wait is out (the row as last seen). On this
// host (`order` given), a wrapper that dies meanwhile without recording the end (SIGKILLed;
// one of a version before stop, which ignores the doorbell) is stood in for.
async function waitForEnd(store: RunStore, row: RunRow, waitMs: number, order: StopOrder | null, abort?: AbortSignal): Promise<Stopping> {
  const deadline = Date.now() + waitMs;
  let seen = row;
  for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
    seen = (await store.getRun(row.id)) ?? seen;
    if (seen.status !== 'running') return { state: 'ended', row: seen };
    if (order !== null && !isSameProcess(seen.pid, seen.wrapper_start)) {
      // Its last word may be on the way: read once more before standing in.
      seen = (await store.getRun(row.id)) ?? seen;
      return seen.status !== 'running' ? { state: 'ended', row: seen } : standIn(store, seen, order);
    }
    const left = deadline - Date.now();
    if (left <= 0 || abort?.aborted) return { state: 'running', row: seen };
    await sleep(Math.min(delay, left), abort);
  }
}

// The wrapper is gone. What it started may live on in its command's process group (its
// pgid is the command's pid), which is stopped here, then the run recorded `killed`. Members
// are recognised by the mark the wrapper put in their environment (CRONGUARD_PID), so a
// reused pid is never signalled.
async function standIn(store: RunStore, row: RunRow, order: StopOrder): Promise<Stopping> {
  const left = leftOf(row);
  if (left === null) {
    return { state: 'not-running', row, why: `run ${row.id} of ${row.job} is not running: its wrapper (pid ${row.pid}) is gone and left nothing running; the job's next run records it abandoned` };
  }
  const group = new ProcessGroup(left.pgid, order.signal, order.killAfterMs);
  group.stop();
  await group.waitUntilGone();
  const finishedAt = new Date();
  const kill = group.escalated ? `, then SIGKILL after ${formatDuration(order.killAfterMs)}` : '';
  const error = `stopped by ${order.by}${kill}: its wrapper (pid ${row.pid}) was gone; ${left.members.length} process${left.members.length === 1 ? '' : 'es'} of its command stopped`;
  const outcome = { status: 'killed', finishedAt, durationMs: Math.max(0, finishedAt.getTime() - Date.parse(row.started_at)), exitCode: null, signal: group.escalated ? 'SIGKILL' : order.signal, output: null, outputTruncated: false, error } as const;
  await store.finishRun(row.id, outcome, true);
  return { state: 'ended', row: (await store.getRun(row.id)) ?? row };
}

// What is left of a run whose wrapper is gone: the living processes of its command's process
// group that carry the wrapper's mark (CRONGUARD_PID=pid, so a reused pid is never taken for
// them), and that group (its pgid is the command's pid). A wrapper SIGKILLed between starting
// its command and recording the command's pid left child_pid empty: the command is then found
// by the mark alone, as the leader of its own group (also how `disable --drain` tells a dead
// wrapper's run that left nothing running).
export function leftOf(row: Pick<RunRow, 'pid' | 'child_pid'>): { pgid: number; members: number[] } | null {
  const marked = markedProcesses(row.pid, row.child_pid);
  const pgid = row.child_pid ?? marked.find((p) => p.pid === p.pgid)?.pgid ?? marked[0]?.pgid;
  if (pgid === undefined) return null;
  const members = marked.filter((p) => p.pgid === pgid).map((p) => p.pid);
  return members.length === 0 ? null : { pgid, members };
}

// The living processes that carry the mark; only those of group `pgid` when it is known
// (an environment is read only where the group matches).
function markedProcesses(wrapperPid: number, pgid: number | null): { pid: number; pgid: number }[] {
  const mark = `CRONGUARD_PID=${wrapperPid}`;
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  return pids.map(Number).flatMap((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state === 'Z' || state === 'X' || (pgid !== null && Number(pgrp) !== pgid)) return [];
      return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(mark) ? [{ pid, pgid: Number(pgrp) }] : [];
    } catch {
      return [];
    }
  });
}
