import type { RunConfig } from '../../cli/config.js';
import type { AdmitOptions } from '../../store/admission.js';
import { isShared } from '../../store/log-spec.js';
import type { NewRun, RunRow } from '../../store/types.js';
import { formatDuration } from '../../util/duration.js';
import type { Messages } from '../../util/io.js';
import { AroundGate, type Entry, type Gate } from '../gate/gate.js';
import { notDue } from '../loop/due.js';
import type { RunRecorder } from '../recorder.js';
import { betweenRuns } from './stop-between.js';
import { STOP_POLL_MS } from './stop-listener.js';
import { stopRun } from './stop-run.js';

// Beyond the old run's kill-after: for its wrapper to see the request (a shared log's poll)
// and to record its end.
const REPLACE_MARGIN_MS = 5000;

// --replace: before the lock is asked for, a job that is due (a paused one, or one whose
// interval has not passed, stops nothing) stops its running copies; once this run is
// admitted, the runs it replaced name it (replaced()).
export class ReplacingGate extends AroundGate {
  constructor(
    inner: Gate,
    private readonly config: RunConfig,
    private readonly options: AdmitOptions,
    private readonly run: NewRun,
    private readonly say: Messages,
  ) {
    super(inner);
  }

  async admit(abort: AbortSignal): Promise<Entry> {
    const refused = await notDue(this.recorder, this.config, this.options, this.run, true);
    if (refused) return refused;
    const ended = await replaceRunning(this.recorder, this.config, this.run, this.say, abort);
    // A signal ends the wait for the old copy's end as it ends a wait for the lock.
    if (abort.aborted) throw abort.reason;
    const entry = await this.inner.admit(abort);
    if (entry.admitted && ended.length > 0) await replaced(this.recorder, ended, this.run.host);
    return entry;
  }
}

// Stops the job's running copies (on any host, as `cronguard stop` does, with this
// job's --kill-signal) and waits for their end, bounded by --kill-after plus a margin, so
// that this run then finds the lock free. Returns the runs that ended, for replaced() to
// name their successor. A run of this same tick on another host is the fleet's run of this
// minute, not a copy to replace: this one skips as it would without --replace (a fleet whose
// every host runs `--replace` would otherwise stop each other's run every minute).
async function replaceRunning(recorder: RunRecorder, config: RunConfig, run: NewRun, say: Messages, abort: AbortSignal): Promise<RunRow[]> {
  const store = recorder.openStore;
  if (!store) {
    say.warn(`${config.name}: --replace: the run log is out of reach; nothing was stopped`);
    return [];
  }
  const running = await recorder.consult('find the running copy', (s) => s.listRuns({ jobs: [config.name], status: 'running', limit: 100 }));
  // And this host's copy between two runs (a retry's delay, a loop's wait), which holds the
  // lock as firmly as a running one.
  const recent = await recorder.consult('find a copy between runs', (s) => s.listRuns({ jobs: [config.name], limit: 100 }));
  const copies = [...(running ?? []), ...betweenRuns(recent ?? [])].filter((row) => !sameTick(row, run, config));
  const by = `${run.username ?? 'unknown'}@${run.host} (cronguard --replace, pid ${run.pid})`;
  const order = { signal: config.killSignal, by, killAfterMs: config.killAfterMs, shared: isShared(config.log) };
  const boundMs = config.killAfterMs + REPLACE_MARGIN_MS + (order.shared ? STOP_POLL_MS : 0);
  const stopped = await Promise.all(copies.map((row) => stopRun(store, row, order, boundMs, abort).catch(() => null)));
  if (abort.aborted) return [];
  const ended: RunRow[] = [];
  for (const [i, result] of stopped.entries()) {
    const row = copies[i] as RunRow;
    if (result?.state === 'ended') ended.push(result.row);
    else if (result?.state === 'running') say.warn(`${config.name}: --replace: run ${row.id} on ${row.host} is still running after ${formatDuration(boundMs)}; this run waits for the lock as usual`);
    else say.verbose(`${config.name}: --replace: ${result?.why ?? `run ${row.id} could not be asked to stop (the run log did not answer)`}`);
  }
  return ended;
}

// The runs this one replaced now say by which run, and on which host ("replaced by run N on
// HOST; " before how they ended): two --replace invocations racing both ask the old run to
// stop, and the request it read may be the one whose run then did not start.
async function replaced(recorder: RunRecorder, runs: readonly RunRow[], host: string): Promise<void> {
  const id = recorder.runId;
  if (id === null) return;
  for (const row of runs) {
    await recorder.consult('name the replacing run', (store) => store.amendError(row.id, `replaced by run ${id} on ${host}; ${row.error ?? row.status}`));
  }
}

function sameTick(row: RunRow, run: NewRun, config: RunConfig): boolean {
  if (run.tick === null || row.tick === null || config.everyTick || row.host === run.host) return false;
  return Date.parse(row.tick) === run.tick.getTime();
}
