import type { RunConfig } from '../cli/config.js';
import type { DbConfig } from '../pg/config.js';
import type { DatabaseLock } from '../lock/database.js';
import { holdLease, type LeaseLine } from '../lock/lease.js';
import type { Messages } from '../util/io.js';
import { connectPostgres } from './index.js';
import { PostgresStore } from './postgres.js';

// A lease's way to its database (see lock/lease.ts): the run log's own session while it
// answers; while a renewal on it is unanswered (another would only queue behind it), or once
// it is lost, a connection of its own. That one is replaced when it fails, or when it too
// has a renewal unanswered: at most two connections, and the oldest renewal, on the log's,
// still waiting for its answer. The statements need no session state, so any connection of
// any pooler does.
export function postgresLeaseLine(log: PostgresStore, open: (signal: AbortSignal) => Promise<PostgresStore>): LeaseLine {
  let own: PostgresStore | null = null;
  let closed = false;
  const waiting = new Set<PostgresStore>();
  const drop = (store: PostgresStore) => {
    if (store !== own) return;
    own = null;
    void store.close().catch(() => {});
  };
  // One connection opened at a time: a renewal sent while another is still connecting waits for it.
  let opening: Promise<PostgresStore> | null = null;
  const via = async (connectMs: number): Promise<PostgresStore> => {
    if (!log.connectionLost && !waiting.has(log)) return log;
    if (opening) return opening;
    if (own && (own.connectionLost || waiting.has(own))) drop(own);
    if (own) return own;
    opening = open(AbortSignal.timeout(Math.ceil(connectMs)));
    try {
      const fresh = await opening;
      // Closed meanwhile (the run ended): not kept open.
      if (closed) {
        void fresh.close().catch(() => {});
        throw new Error('the lease is closed');
      }
      own = fresh;
      return fresh;
    } finally {
      opening = null;
    }
  };
  return {
    async renew(key, epoch, ttlMs, connectMs) {
      const store = await via(connectMs);
      waiting.add(store);
      try {
        return await store.renewLease(key, epoch, ttlMs);
      } catch (error) {
        drop(store);
        throw error;
      } finally {
        waiting.delete(store);
      }
    },
    async release(key, epoch) {
      const store = await via(5000);
      await store.releaseLease(key, epoch);
    },
    async close() {
      closed = true;
      if (own) await own.close();
      own = null;
    },
  };
}

// The lease as the admission statement takes it (see DatabaseLock): in the log's database,
// renewed over the log's connection or any other. The command learns the epoch (its fencing
// token), the job and where the lease lives.
export function leaseLock(config: RunConfig, log: PostgresStore, say: Messages): DatabaseLock {
  const db = config.db as DbConfig;
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
