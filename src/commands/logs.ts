import { hostname } from 'node:os';
import type { Settings } from '../cli/settings.js';
import { NotFoundError, UsageError } from '../errors.js';
import { liveDir, liveName } from '../run/supervisor/live-file.js';
import { LiveReader } from '../run/supervisor/live-reader.js';
import type { RunStore } from '../store/run-store.js';
import type { RunRow } from '../store/types.js';
import { validateName } from '../util/name.js';
import { isSameProcess } from '../util/process-id.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';
import { follow, type Note } from './follow.js';
import { ending, runHeader } from './run-header.js';
import { Stdout } from './stdout.js';
import { colours } from './table.js';

const HELP = `
On a terminal a header comes first: run, job, host, status, exit, start (local
time) and duration. Piped, stdout is the output alone, byte for byte; notes go
to stderr.

-f prints the output so far, follows it live until the run ends, then says on
stderr how it ended (exit 0; ^C: 130). Not running: the last run's output
(exit 0). Running on another host: a note naming the host (exit 1). A running
job's output is copied to <state-dir>/live/, so give the job's state directory.
`;

// `cronguard logs RUN_ID|NAME [-f]`: the captured output of one run (a job's latest for
// NAME), byte for byte on stdout; notes about it go to stderr so the output can be piped.
export async function logs(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('logs', 'captured output of a run; -f follows a running one'))
    .argument('<run>', 'a run id, or a job name for its latest run')
    .option('-f, --follow', 'follow the running run live until it ends (this host)')
    .addHelpText('after', HELP);
  parse(program, args);
  const target = program.args[0] as string;
  const byId = /^\d+$/.test(target);
  if (byId && !/^\d{1,15}$/.test(target)) throw new UsageError(`'${target}' is too large to be a run id`);
  if (!byId) validateName(target);
  const following = program.opts<{ follow?: boolean }>().follow === true;
  const choice = new StoreChoice(program.opts(), settings);
  const store = await choice.openExisting();
  try {
    const run = store && (await find(store, target, byId, following));
    if (!store || !run) throw new NotFoundError(byId ? `no run with id ${target}` : `no runs recorded for job ${target}`);
    const stop = new AbortController();
    const out = new Stdout(stop);
    const note: Note = (line) => {
      if (out.midLine && out.isTerminal) process.stdout.write('\n');
      process.stderr.write(`cronguard logs: ${line}\n`);
    };
    if (out.isTerminal) await out.write(runHeader(run, colours()));
    if (run.status !== 'running') {
      await stored(run, out, note);
      if (following) note(`run ${run.id} (${run.job}) is not running; it ${ended(run)}`);
      return 0;
    }
    if (run.host !== hostname()) {
      const there = following ? `; follow it there (cronguard logs -f ${run.id} on ${run.host})` : '';
      note(`run ${run.id} (${run.job}) is running on ${run.host} (pid ${run.pid}); its output is stored when it ends${there}`);
      return following ? 1 : 0;
    }
    const name = liveName(run.run_key);
    if (name === null) throw new NotFoundError(`run ${run.id} (${run.job}) has no live output to read (its run key is not this version's)`);
    const reader = new LiveReader(liveDir(choice.stateDir), name);
    if (reader.uncaptured()) {
      note(`run ${run.id} (${run.job}) does not capture its output (--capture 0 without -q): nothing to ${following ? 'follow' : 'show'}`);
      return 0;
    }
    if (following) return await follow(run, store, reader, out, stop, note);
    await reader.pump(out.write);
    reader.close();
    const gone = !isSameProcess(run.pid, run.wrapper_start);
    const so = reader.total === 0 ? 'has printed nothing yet' : 'this is its output so far';
    if (!stop.signal.aborted) note(gone ? `run ${run.id} (${run.job}): its wrapper (pid ${run.pid}) is gone` : `run ${run.id} (${run.job}) is still running; ${so} (logs -f follows it)`);
    return 0;
  } finally {
    await store?.close();
  }
}

// The run a NAME means: its latest, except that -f prefers one running on this host (with
// a shared log, another host's run of the same job may have started since).
async function find(store: RunStore, target: string, byId: boolean, following: boolean): Promise<RunRow | null> {
  if (byId) return store.getRun(Number(target));
  if (following) {
    const [here] = await store.listRuns({ jobs: [target], status: 'running', host: hostname(), limit: 1 });
    if (here) return here;
  }
  return store.latestRun(target);
}

// A finished run's output, as the run log kept it.
async function stored(run: RunRow, out: Stdout, note: Note): Promise<void> {
  if (run.output === null) {
    note(`run ${run.id} (${run.job}) kept no output (${run.status === 'abandoned' ? 'its wrapper vanished' : '--capture 0'})`);
    return;
  }
  await out.write(run.output);
  if (run.output_truncated) {
    note(`run ${run.id}: output truncated; this is its last ${Buffer.byteLength(run.output)} bytes`);
  }
}

function ended(run: RunRow): string {
  return run.status === 'abandoned' ? 'was abandoned (its wrapper vanished)' : `ended: ${ending(run)}`;
}
