import { hostname } from 'node:os';
import type { Settings } from '../cli/settings.js';
import { parseSignal } from '../cli/values.js';
import { CronguardError, NotFoundError, UsageError } from '../errors.js';
import { betweenRuns } from '../run/stop/stop-between.js';
import { type Stopping, stopRun } from '../run/stop/stop-run.js';
import type { RunStore } from '../store/run-store.js';
import type { RunRow } from '../store/types.js';
import { formatDuration, parseDuration } from '../util/duration.js';
import { validateName } from '../util/name.js';
import { userName } from '../util/user.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

// Exit codes of `stop` beyond the common ones (64 usage, 69 unreachable, 1 no such job or run).
export const STOP_EXIT = { stopped: 0, notRunning: 2, stillRunning: 124 } as const;

// A group whose wrapper is gone gets SIGKILL after this (the job's --kill-after was the
// wrapper's own); a live wrapper uses the job's.
const ORPHAN_KILL_AFTER_MS = 10_000;

const HELP = `
Stops the run's whole process group (the command and everything it started) on
whichever host runs it: on this host its wrapper is told at once; on another,
through the shared run log, its wrapper picks the request up within 2 seconds.
The wrapper sends SIG (default TERM) to the group, SIGKILL after the job's
--kill-after, and records the run as killed, "stopped by USER@HOST (cronguard
stop)". A wrapper that is gone while its command lives on (this host only) is
stood in for: the group is stopped here (SIGKILL after 10s) and the run is
recorded. NAME stops every running run of the job, and this host's invocations
between two runs (a retry's delay, a loop's wait), which then start nothing
more.

Exit: 0 stopped (ended), 1 no such job or run, 2 not running (nothing to stop,
or another host's run with an embedded log), 124 still running after --wait D
(asked; it may end later), 64 usage, 69 run log unreachable. --wait 0 asks and
returns at once (0).
`;

// `cronguard stop NAME|RUN_ID [--signal SIG] [--wait D]`: stops a running run and waits
// for its end.
export async function stop(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('stop', 'stop a running run (its whole process group), wherever it runs'))
    .argument('<run>', 'a run id, or a job name for its running runs')
    .option('--signal <sig>', 'the signal for the process group (default TERM)')
    .option('--wait <duration>', 'wait at most DURATION for the end (default: until it ends; 0: do not wait)')
    .addHelpText('after', HELP);
  parse(program, args);
  const target = program.args[0] as string;
  const flags = program.opts<{ signal?: string; wait?: string }>();
  const signal = parseSignal(flags.signal ?? 'TERM', '--signal');
  const waitMs = flags.wait === undefined ? Number.POSITIVE_INFINITY : parseDuration(flags.wait, '--wait');
  const byId = /^\d+$/.test(target);
  if (byId && !/^\d{1,15}$/.test(target)) throw new UsageError(`'${target}' is too large to be a run id`);
  if (!byId) validateName(target);
  const choice = new StoreChoice(program.opts(), settings);
  const store = await choice.openExisting();
  if (!store) throw new NotFoundError(byId ? `no run with id ${target}` : `no job ${target} in the run log`);
  try {
    const runs = await runsOf(store, target, byId);
    const order = { signal, by: `${userName()}@${hostname()} (cronguard stop)`, killAfterMs: ORPHAN_KILL_AFTER_MS, shared: choice.db !== null };
    const results = await Promise.all(runs.map((row) => stopRun(store, row, order, waitMs)));
    return results.map((r) => say(r, waitMs)).reduce((worst, code) => Math.max(worst, code), 0);
  } finally {
    await store.close();
  }
}

// The runs to stop: the one named by id (running or not: stopRun says), or the job's running
// ones; a job with none is not running (2), one the log never saw is not found (1).
async function runsOf(store: RunStore, target: string, byId: boolean): Promise<RunRow[]> {
  if (byId) {
    const row = await store.getRun(Number(target));
    if (!row) throw new NotFoundError(`no run with id ${target}`);
    return [row];
  }
  const running = await store.listRuns({ jobs: [target], status: 'running', limit: 1000 });
  // And this host's invocations between two runs (a retry's delay, a loop's wait).
  const between = betweenRuns(await store.listRuns({ jobs: [target], limit: 100 }));
  if (running.length + between.length > 0) return [...running, ...between];
  const [job] = await store.jobStatus(target);
  if (!job) throw new NotFoundError(`no job ${target} in the run log`);
  throw new NotRunning(`${target} is not running; nothing to stop`);
}

class NotRunning extends CronguardError {
  constructor(message: string) {
    super(message, STOP_EXIT.notRunning);
  }
}

// One line on stderr per run, and its exit code.
function say(result: Stopping, waitMs: number): number {
  const { row } = result;
  const run = `run ${row.id} (${row.job} on ${row.host})`;
  if (result.state === 'not-running') {
    process.stderr.write(`cronguard stop: ${result.why}\n`);
    return STOP_EXIT.notRunning;
  }
  if (result.state === 'running') {
    if (waitMs === 0) {
      process.stderr.write(`cronguard stop: ${run} asked to stop\n`);
      return STOP_EXIT.stopped;
    }
    process.stderr.write(`cronguard stop: ${run} is still running after ${formatDuration(waitMs)}; it was asked to stop (cronguard history ${row.job} shows its end)\n`);
    return STOP_EXIT.stillRunning;
  }
  process.stderr.write(`cronguard stop: ${run} ${row.status}${row.error ? `: ${row.error}` : ''}\n`);
  return STOP_EXIT.stopped;
}
