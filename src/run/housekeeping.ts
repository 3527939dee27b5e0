import { join } from 'node:path';
import type { RunConfig } from '../cli/config.js';
import { describe } from '../errors.js';
import { isRecorded, isShared } from '../store/log-spec.js';
import type { Messages } from '../util/io.js';
import { touch, touchedSince, unlinkQuietly } from '../util/stamp.js';
import { monotonicMs } from '../util/time.js';
import type { RunRecorder } from './recorder.js';

// The automatic prune runs about this often for a whole run log.
const PRUNE_EVERY_MS = 86_400_000;
// Every job keeps at least this many of its latest runs, however old.
const KEEP = 10;
// The most an automatic prune may add to one run; what is left waits for the next run.
const BUDGET_MS = 2000;

// The automatic prune (CRONGUARD_RETENTION): after the run, with the lock released, at most
// about once a day for the whole log. A stamp file in the state dir spares every other run
// of the day even the round trip that asks the log whether it is due.
export async function housekeep(recorder: RunRecorder, config: RunConfig, say: Messages): Promise<void> {
  if (config.retentionMs === null || !isRecorded(config.log)) return;
  const stamp = join(config.stateDir, `prune-${logTarget(config)}.stamp`);
  const now = Date.now();
  if (touchedSince(stamp, now - PRUNE_EVERY_MS)) return;
  touch(config.stateDir, stamp, now);
  const store = recorder.openStore;
  if (!store) return;
  const before = new Date(now - config.retentionMs);
  // A failure (a role without DELETE, a lost connection) is a note for -v, never the run's.
  try {
    if (!(await store.claimTask('prune', PRUNE_EVERY_MS))) return;
    const result = await store.prune({ before, keep: KEEP, deadline: monotonicMs() + BUDGET_MS });
    say.verbose(`${config.name}: pruned ${result.runs} runs and ${result.requests} requests older than ${before.toISOString()}`);
    if (result.complete) return;
    // Unfinished: the next run carries on rather than waiting a day.
    await store.releaseTask('prune');
    unlinkQuietly(stamp);
  } catch (error) {
    say.verbose(`${config.name}: automatic prune of the run log failed: ${describe(error)}`);
  }
}

// Which run log a stamp stands for: each database and schema has its own.
export function logTarget(config: RunConfig): string {
  if (!isShared(config.log)) return 'local';
  return config.log.db.place.replace(/[^A-Za-z0-9_.-]/g, '_');
}
