import type { LeaseKey, LeaseLine } from './lease.js';

// What a lease line needs of a run log's store (PostgresStore, MysqlStore), or of a Redis
// connection (redis/lease.ts).
export interface LeaseStore<K extends LeaseKey = bigint> {
  // The store's connection is gone: renewals go over another.
  readonly connectionLost: boolean;
  renewLease(key: K, epoch: bigint, ttlMs: number): Promise<boolean>;
  releaseLease(key: K, epoch: bigint): Promise<void>;
  close(): Promise<void>;
}

// A lease's way to its database (see lock/lease.ts): the run log's own session while it
// answers; while a renewal on it is unanswered (another would only queue behind it), or once
// it is lost, a connection of its own. That one is replaced when it fails, or when it too
// has a renewal unanswered: at most two connections, and the oldest renewal, on the log's,
// still waiting for its answer. The statements need no session state, so any connection of
// any pooler does.
export function leaseLine<K extends LeaseKey, S extends LeaseStore<K>>(log: S, open: (signal: AbortSignal) => Promise<S>): LeaseLine<K> {
  let own: S | null = null;
  let closed = false;
  const waiting = new Set<S>();
  const drop = (store: S) => {
    if (store !== own) return;
    own = null;
    void store.close().catch(() => {});
  };
  // One connection opened at a time: a renewal sent while another is still connecting waits for it.
  let opening: Promise<S> | null = null;
  const via = async (connectMs: number): Promise<S> => {
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
