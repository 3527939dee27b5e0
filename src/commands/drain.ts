import type { RunRow, RunStore } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import { monotonicMs } from '../util/time.js';
import { printable } from './format.js';

// How often --drain looks again, and how many active runs it names at most.
const LOOK_EVERY_MS = 500;
const SHOWN = 1000;

// `disable --drain D`, after the pause: waits until no run of the job (`name`), or of any job
// (null), is `running` in the log, looking every half second; 0 then. When D runs out first,
// one line per run still active (job, host, pid, run id, since) and `exitCode`. The pause
// was committed first, and it waited for admissions under way, so no run admitted after it
// starts; only a retry that looked for a pause (attempts.ts) just before it can still start
// its next attempt.
export async function drain(log: RunStore, name: string | null, drainMs: number, exitCode: number): Promise<number> {
  const deadline = monotonicMs() + drainMs;
  for (;;) {
    const active = await log.listRuns({ status: 'running', limit: SHOWN, ...(name === null ? {} : { jobs: [name] }) });
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

function describe(r: RunRow): string {
  return printable(`${r.job} on ${r.host} (pid ${r.pid}, run ${r.id}, since ${r.started_at})`);
}
