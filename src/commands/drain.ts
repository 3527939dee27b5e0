import { hostname } from 'node:os';
import { describe as explain, UnavailableError } from '../errors.js';
import { printable } from '../present/format.js';
import { leftOf } from '../run/stop/stop-run.js';
import type { RunStore } from '../store/run-store.js';
import type { RunRow } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import { isSameProcess } from '../util/process-id.js';
import { redact } from '../util/redact.js';
import { monotonicMs } from '../util/time.js';

// How often --drain looks again, and how many active runs it names at most.
const LOOK_EVERY_MS = 500;
const SHOWN = 1000;

// `disable --drain D`, after the pause: waits until no run of the job (`name`), or of any job
// (null), is `running` in the log, looking every half second; 0 then. When D runs out first,
// one line per run still active (job, host, pid, run id, since) and `exitCode`. The pause
// was committed first, and it waited for admissions under way, so no run admitted after it
// starts; a retry looks for a pause again once its next attempt's row is there
// (retry-pause.ts), so no attempt this drain did not see starts either.
export async function drain(log: RunStore, reopen: () => Promise<RunStore>, name: string | null, drainMs: number, exitCode: number): Promise<number> {
  const deadline = monotonicMs() + drainMs;
  const told = new Set<number>();
  const looker = new Looker(log, reopen, formatDuration(drainMs));
  try {
    for (;;) {
      const rows = await looker.running(name);
      const active = rows?.filter((r) => !leftNothing(r, told)) ?? null;
      if (active?.length === 0) {
        process.stderr.write(`cronguard: drained: no run ${name === null ? 'of any job ' : `of ${name} `}is active\n`);
        return 0;
      }
      if (monotonicMs() >= deadline) {
        if (active === null) throw looker.outOfReach();
        const lines = active.map((r) => `cronguard: still running after --drain ${formatDuration(drainMs)}: ${describe(r)}\n`);
        process.stderr.write(lines.join(''));
        return exitCode;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(LOOK_EVERY_MS, Math.max(0, deadline - monotonicMs()))));
    }
  } finally {
    await looker.close();
  }
}

// The drain's looks at the log. A database cut meanwhile (a restart, a failover, a session
// killed) ended the drain with a stack trace, the pause committed but nothing said about
// the runs: it is said once, and each look tries a new connection until D runs out; then
// one line, exit 69, the pause holding all the same.
class Looker {
  private current: RunStore | null;
  private lost: unknown = null;
  private readonly opened: RunStore[] = [];

  constructor(
    first: RunStore,
    private readonly reopen: () => Promise<RunStore>,
    private readonly drainFor: string,
  ) {
    this.current = first;
  }

  // The runs `running` (of `name`, or of every job), or null when the log is out of reach.
  async running(name: string | null): Promise<RunRow[] | null> {
    try {
      if (this.current === null) {
        this.current = await this.reopen();
        this.opened.push(this.current);
      }
      return await this.current.listRuns({ status: 'running', limit: SHOWN, ...(name === null ? {} : { jobs: [name] }) });
    } catch (error) {
      if (this.lost === null) process.stderr.write(`cronguard: lost the run log while draining (${printable(redact(explain(error)))}); looking again until --drain ${this.drainFor} runs out\n`);
      this.lost = error;
      this.current = null;
      return null;
    }
  }

  outOfReach(): UnavailableError {
    return new UnavailableError(`the run log is out of reach (${printable(redact(explain(this.lost)))}); runs may still be active after --drain ${this.drainFor}; the pause holds`);
  }

  // Those it opened; the first is its caller's.
  async close(): Promise<void> {
    for (const store of this.opened) await store.close().catch(() => undefined);
  }
}

// A run of this host whose wrapper was SIGKILLed stays `running` in the log until the job's
// next run marks it abandoned, and a paused job has no next run: waiting for it would take
// all of D and end 124 for a run that is over. It is over when its wrapper is gone and no
// process of its command (marked with the wrapper's pid) lives on; said once. Another
// host's rows cannot be judged from here, and one whose command lives on is still active.
function leftNothing(r: RunRow, told: Set<number>): boolean {
  if (r.host !== hostname() || isSameProcess(r.pid, r.wrapper_start)) return false;
  if (leftOf(r) !== null) return false;
  if (!told.has(r.id)) process.stderr.write(`cronguard: ${describe(r)} ended without recording it: its wrapper (pid ${r.pid}) is gone and left nothing running\n`);
  told.add(r.id);
  return true;
}

function describe(r: RunRow): string {
  return printable(`${r.job} on ${r.host} (pid ${r.pid}, run ${r.id}, since ${r.started_at})`);
}
