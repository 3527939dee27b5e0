import { constants } from 'node:os';
import { NotFoundError } from '../errors.js';
import type { RequestRow } from '../store/requests.js';
import type { RunStore } from '../store/run-store.js';
import type { RunRow } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import { sleep } from '../util/io.js';

// How long a request may wait without a run picking it up before `--wait` says so (once):
// a job that nothing runs would otherwise be waited for in silence for ever.
const UNPICKED_NOTICE_MS = 60_000;

// `request --wait`: polls the request until it has ended, and answers with the exit code of
// the run that served it, as the run itself would have exited (a timeout 124, a signal
// 128+N, a lost lock 75).
export async function waitFor(log: RunStore, id: number, timeoutMs: number | null): Promise<number> {
  const started = Date.now();
  const deadline = timeoutMs === null ? Number.POSITIVE_INFINITY : started + timeoutMs;
  let told = false;
  for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
    const row = await log.getRequest(id);
    if (!row) throw new NotFoundError(`request ${id} is gone from the run log (pruned, or deleted) before it was seen to end`);
    if (row.status === 'cancelled') throw new NotFoundError(`request ${id} was cancelled`);
    if (row.status === 'succeeded' || row.status === 'failed') return exitOf(log, row);
    const now = Date.now();
    if (now >= deadline) {
      process.stderr.write(`cronguard: request ${id} is still ${row.status} after ${formatDuration(timeoutMs ?? 0)}; stopped waiting\n`);
      return 124;
    }
    if (!told && row.status === 'pending' && now - started >= UNPICKED_NOTICE_MS) {
      told = true;
      process.stderr.write(
        `cronguard: request ${id} is still pending after ${formatDuration(now - started)}: no run of ${row.job} has picked it up (is a crontab line with --on-request, --min-interval or --for running it?); still waiting\n`,
      );
    }
    await sleep(Math.min(delay, deadline - now));
  }
}

async function exitOf(log: RunStore, row: RequestRow): Promise<number> {
  const run = row.run_id === null ? null : await log.getRun(row.run_id);
  const code = codeOf(run) ?? row.exit_code ?? (row.status === 'succeeded' ? 0 : 1);
  if (row.status === 'failed') {
    const ran = row.run_id === null ? '' : ` by run ${row.run_id} (cronguard logs ${row.run_id})`;
    const how = run && run.status !== 'failed' ? `${run.status}, ` : '';
    process.stderr.write(`cronguard: request ${row.id} failed${ran}, ${how}exit ${code}\n`);
  }
  return code;
}

// The exit code a run's wrapper gave (see the contract's table), from its row.
function codeOf(run: RunRow | null): number | null {
  if (!run) return null;
  if (run.status === 'timed_out') return 124;
  if (run.status === 'lock_lost') return 75;
  if (run.exit_code !== null) return run.exit_code;
  const signo = run.signal === null ? undefined : (constants.signals as Record<string, number>)[run.signal];
  return signo === undefined ? null : 128 + signo;
}
