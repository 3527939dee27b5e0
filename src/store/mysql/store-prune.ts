import { monotonicMs } from '../../util/time.js';
import { PRUNE_BATCH, type PruneOptions, type PruneResult } from '../types.js';
import type { MysqlSession } from './session.js';
import type { ReadSql } from './sql-reads.js';

// Deletes old finished runs, then old ended requests, in batches of PRUNE_BATCH, each its
// own short transaction, oldest first, up to the newest run old enough to go (so runs
// recorded meanwhile are never looked at). A job's latest `keep` runs, its latest success
// and running rows stay; rows another session has locked are left for next time. Stops at
// the deadline, saying so (complete: false).
export async function pruneLog(session: MysqlSession, sql: ReadSql, { before, keep, deadline }: PruneOptions): Promise<PruneResult> {
  const [bound] = await session.query<{ id: number }>(sql.pruneBound, [before]);
  const upTo = Number(bound?.id ?? 0);
  let runs = 0;
  let after = 0;
  for (;;) {
    if (monotonicMs() >= deadline) return { runs, requests: 0, complete: false };
    const ids = await session.transaction(async (t) => {
      const batch = (await t.query<{ id: number }>(sql.pruneBatch, [after, upTo, before, keep, Math.max(keep - 1, 0), PRUNE_BATCH])).map((r) => Number(r.id));
      if (batch.length > 0) await t.execute(sql.pruneRuns(batch.length), batch);
      return batch;
    });
    if (ids.length === 0) break;
    runs += ids.length;
    after = Math.max(...ids);
  }
  let requests = 0;
  for (let n = -1; n !== 0 && monotonicMs() < deadline; requests += n) {
    n = (await session.transaction((t) => t.execute(sql.pruneRequests, [before, PRUNE_BATCH]))).affectedRows;
  }
  return { runs, requests, complete: monotonicMs() < deadline };
}
