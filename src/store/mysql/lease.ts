import { holdLease } from '../../lock/lease.js';
import { leaseLine } from '../../lock/lease-line.js';
import type { LockSpec } from '../../lock/lock-spec.js';
import type { Messages } from '../../util/io.js';
import type { DatabaseLock } from '../shared.js';
import type { MysqlConfig } from './config.js';
import { connectMysqlServer } from './connect.js';
import { MysqlStore } from './store.js';

// `-l lease` in a MySQL or MariaDB log (as ../postgres/lease.ts): a row of the log's `leases`
// table, taken by the admission's transaction (lease-admit.ts), renewed over the log's
// session or, while that one is busy or lost, a connection of its own (lock/lease-line.ts).
// No GET_LOCK and no session holds it: a wrapper that dies leaves a row that expires.
export function mysqlLeaseLock(job: string, { key, ttlMs }: Extract<LockSpec, { kind: 'lease' }>, db: MysqlConfig, log: MysqlStore, say: Messages): DatabaseLock {
  // A renewal's own connection: a few seconds at most, then the next try. The log is known
  // current (the lease was taken from it): no check, no migration.
  const open = async (signal: AbortSignal) =>
    new MysqlStore(await connectMysqlServer(db, `cronguard:${job}`, { retryForMs: 0, abort: signal }), db.schema, false);
  const line = leaseLine(log, open);
  const env = { CRONGUARD_JOB: job, CRONGUARD_DATABASE: db.display, CRONGUARD_SCHEMA: db.schema };
  return {
    description: `lease ${key} in ${db.display} (database ${db.schema}, ttl ${ttlMs / 1000}s)`,
    request: { kind: 'lease', key, ttlMs },
    alone: null,
    spareWatchdog: false,
    taken: (admitted, sentAt) => {
      const epoch = admitted.epoch as bigint;
      const held = holdLease({ key, epoch, ttlMs, sentAt }, line, env, say);
      return { lock: held, release: { kind: 'lease', key, epoch }, releasedElsewhere: held.releasedElsewhere };
    },
    close: () => line.close(),
  };
}
