import { inDatabase, ofOneHost } from '../lock/lock-spec.js';
import type { AdmitOptions } from './admission.js';
import type { NewRun, RunningRow } from './types.js';

// A `running` row of a job, read to be held against a run given another --max-running.
export interface SlotRow extends RunningRow {
  readonly host: string;
  readonly max_running: number | null;
}

// Whether `row` was given another --max-running than `run` (NULL, from before, reads as 1).
export function disagrees(row: Pick<SlotRow, 'max_running'>, run: Pick<NewRun, 'maxRunning'>): boolean {
  return (row.max_running ?? 1) !== run.maxRunning;
}

// Whether a running copy given another N still refuses `run` (exit 64): only while it may
// still be running in a lock domain the two share. A copy whose wrapper died (SIGKILL, a host
// gone for good) leaves its row `running`, and only a holder of that row's slot settles it:
// once the operator lowers N, nobody takes that slot again, and the row would refuse every
// later copy forever. So a row
// - of this host counts while its wrapper runs (`isGone`), whatever its lock;
// - under a lock of the fleet's database (the advisory lock, GET_LOCK, a lease) counts while
//   that lock is held now: `held`, which the store asks its server (a store that cannot ask
//   answers true);
// - under a lock of another host's own (flock, lockfile) does not count: its slots are that
//   host's files, so the disagreement cannot make two copies share a slot;
// - under a Redis lock, or none recorded, counts: the log cannot ask Redis.
export function stillDisagrees(row: SlotRow, run: Pick<NewRun, 'host' | 'lockBackend' | 'lockKey'>, isGone: AdmitOptions['isGone'], held: (row: SlotRow) => boolean): boolean {
  const here = row.host === run.host;
  if (here && isGone(row, run)) return false;
  if (inDatabase(row.lock_backend)) return held(row);
  return here || row.lock_backend === null || !ofOneHost(row.lock_backend);
}
