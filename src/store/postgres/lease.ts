import { holdLease } from '../../lock/lease.js';
import { leaseLine } from '../../lock/lease-line.js';
import type { LockSpec } from '../../lock/lock-spec.js';
import type { Messages } from '../../util/io.js';
import { connectPostgres } from '../index.js';
import type { DatabaseLock } from '../shared.js';
import type { DbConfig } from './config.js';
import { PostgresStore } from './store.js';

// The lease as the admission statement takes it (see DatabaseLock): in the log's database,
// renewed over the log's connection or any other. The command learns the epoch (its fencing
// token), the job and where the lease lives.
export function leaseLock(job: string, { key, ttlMs }: Extract<LockSpec, { kind: 'lease' }>, db: DbConfig, log: PostgresStore, say: Messages): DatabaseLock {
  // A renewal's own connection: a few seconds at most, then the next try.
  const open = async (signal: AbortSignal) =>
    new PostgresStore(await connectPostgres(db, `cronguard:${job}`, { retryForMs: 0, abort: signal, primary: true }), db.schema, false);
  const line = leaseLine(log, open);
  const env = { CRONGUARD_JOB: job, CRONGUARD_DATABASE: db.display, CRONGUARD_SCHEMA: db.schema };
  return {
    description: `lease ${key} in ${db.display} (schema ${db.schema}, ttl ${ttlMs / 1000}s)`,
    request: { kind: 'lease', key, ttlMs },
    alone: null,
    spareWatchdog: false,
    taken: (admitted, sentAt) => {
      const held = holdLease({ key, epoch: admitted.epoch as bigint, ttlMs, sentAt }, line, env, say);
      return { lock: held, release: { kind: 'lease', key, epoch: admitted.epoch as bigint }, releasedElsewhere: held.releasedElsewhere };
    },
    close: () => line.close(),
  };
}
