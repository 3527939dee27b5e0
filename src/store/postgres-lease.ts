import type { RunConfig } from '../cli/config.js';
import type { DatabaseLock } from '../lock/database.js';
import { holdLease, type LeaseLine } from '../lock/lease.js';
import type { Messages } from '../util/io.js';
import { connectPostgres } from './index.js';
import { PostgresStore } from './postgres.js';

// A lease's way to its database (see lock/lease.ts): the run log's own session while it
// answers; once it is lost, or a renewal on it went unanswered (the statements behind it
// would queue behind that one), a connection of its own, opened again whenever the last
// one fails. The statements need no session state, so any connection of any pooler does.
export function postgresLeaseLine(log: PostgresStore, open: (signal: AbortSignal) => Promise<PostgresStore>): LeaseLine {
  let own: PostgresStore | null = null;
  let logStuck = false;
  const via = async (signal: AbortSignal): Promise<PostgresStore> => {
    if (!logStuck && !log.connectionLost) return log;
    if (own && !own.connectionLost) return own;
    void own?.close();
    own = null;
    own = await open(signal);
    return own;
  };
  const drop = (store: PostgresStore) => {
    if (store === log) logStuck = true;
    else if (store === own) {
      void own.close();
      own = null;
    }
  };
  return {
    async renew(key, epoch, ttlMs, timeoutMs) {
      const limit = AbortSignal.timeout(Math.ceil(timeoutMs));
      const store = await via(limit);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${(timeoutMs / 1000).toFixed(1)}s`)), Math.max(0, timeoutMs));
      });
      try {
        return await Promise.race([store.renewLease(key, epoch, ttlMs), late]);
      } catch (error) {
        drop(store);
        throw error;
      } finally {
        clearTimeout(timer);
      }
    },
    async release(key, epoch) {
      const store = await via(AbortSignal.timeout(5000));
      await store.releaseLease(key, epoch);
    },
    async close() {
      await own?.close();
      own = null;
    },
  };
}

// The lease as the admission statement takes it (see DatabaseLock): in the log's database,
// renewed over the log's connection or any other. The command learns the epoch (its fencing
// token), the job and where the lease lives.
export function leaseLock(config: RunConfig, log: PostgresStore, say: Messages): DatabaseLock {
  const db = config.db as NonNullable<RunConfig['db']>;
  const key = config.lockKey as bigint;
  const ttlMs = config.leaseTtlMs as number;
  // A renewal's own connection: a few seconds at most, then the next try.
  const open = async (signal: AbortSignal) =>
    new PostgresStore(await connectPostgres(db, `cronguard:${config.name}`, { retryForMs: 0, abort: signal, primary: true }), db.schema, false);
  const line = postgresLeaseLine(log, open);
  const env = { CRONGUARD_JOB: config.name, CRONGUARD_DATABASE: db.display, CRONGUARD_SCHEMA: db.schema };
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
