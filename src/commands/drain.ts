import { hostname } from 'node:os';
import { markedMembers } from '../run/stop-run.js';
import type { RunRow, RunStore } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import { isSameProcess } from '../util/process-id.js';
import { monotonicMs } from '../util/time.js';
import { printable } from './format.js';

// How often --drain looks again, and how many active runs it names at most.
const LOOK_EVERY_MS = 500;
const SHOWN = 1000;

// `disable --drain D`, after the pause: waits until no run of the job (`name`), or of any job
// (null), is `running` in the log, looking every half second; 0 then. When D runs out first,
// one line per run still active (job, host, pid, run id, since) and `exitCode`. The pause
// was committed first, and it waited for admissions under way, so no run admitted after it
// starts; a retry looks for a pause again once its next attempt's row is there
// (retry-pause.ts), so no attempt this drain did not see starts either.
export async function drain(log: RunStore, name: string | null, drainMs: number, exitCode: number): Promise<number> {
  const deadline = monotonicMs() + drainMs;
  const told = new Set<number>();
  for (;;) {
    const rows = await log.listRuns({ status: 'running', limit: SHOWN, ...(name === null ? {} : { jobs: [name] }) });
    const active = rows.filter((r) => !leftNothing(r, told));
    if (active.length === 0) {
      process.stderr.write(`cronguard: drained: no run ${name === null ? 'of any job ' : `of ${name} `}is active\n`);
      return 0;
    }
    if (monotonicMs() >= deadline) {
      const lines = active.map((r) => `cronguard: still running after --drain ${formatDuration(drainMs)}: ${describe(r)}\n`);
      process.stderr.write(lines.join(''));
      return exitCode;
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(LOOK_EVERY_MS, Math.max(0, deadline - monotonicMs()))));
  }
}

// A run of this host whose wrapper was SIGKILLed stays `running` in the log until the job's
// next run marks it abandoned, and a paused job has no next run: waiting for it would take
// all of D and end 124 for a run that is over. It is over when its wrapper is gone and no
// process of its command (marked with the wrapper's pid) lives on; said once. Another
// host's rows cannot be judged from here, and one whose command lives on is still active.
function leftNothing(r: RunRow, told: Set<number>): boolean {
  if (r.host !== hostname() || isSameProcess(r.pid, r.wrapper_start)) return false;
  if (r.child_pid !== null && markedMembers(r.child_pid, r.pid).length > 0) return false;
  if (!told.has(r.id)) process.stderr.write(`cronguard: ${describe(r)} ended without recording it: its wrapper (pid ${r.pid}) is gone and left nothing running\n`);
  told.add(r.id);
  return true;
}

function describe(r: RunRow): string {
  return printable(`${r.job} on ${r.host} (pid ${r.pid}, run ${r.id}, since ${r.started_at})`);
}
