import { type Admission, type AdmitOptions, keepsLock, type Refused } from '../admission.js';
import type { NewRun } from '../types.js';
import { admitLocked, type HolderOfSlot, heldDisagreement } from './admit.js';
import { serverErrno } from './errors.js';
import { toHolder } from './rows.js';
import type { MysqlSession } from './session.js';
import type { RunSql } from './sql.js';

// A duplicate key: the lease's row appeared after this transaction looked (a DBA's INSERT
// under READ COMMITTED, which takes no gap lock).
const DUPLICATE = 1062;

// What the admission is asked to take: the lease's key, its ttl, and whether a refusal
// counts as a skip of the run that holds it.
export interface LeaseAsk {
  readonly key: bigint;
  readonly ttlMs: number;
  readonly countSkip: boolean;
}

// The admission and the epoch of the lease it holds (its fencing token), or null.
export interface LeaseAdmission {
  readonly admission: Admission;
  readonly epoch: bigint | null;
}

// `-l lease` (as PostgreSQL's admit() since 0014): the lease is taken by compare-and-set
// first, in the admission's transaction, after the job's row is locked: cronguard's racing
// admissions meet on that row, so exactly one finds the lease free and the others find it
// live. A lease is a row: if anything after fails, the rollback takes it back with the run.
// Refused by the log's rules, it is let go at once (kept for a loop waiting for work).
export function admitLeased(session: MysqlSession, sql: RunSql, run: NewRun, options: AdmitOptions, lease: LeaseAsk): Promise<LeaseAdmission> {
  return session.transaction(async (t): Promise<LeaseAdmission> => {
    await t.query(sql.lockJob, [run.job]);
    const taken = await takeLease(t, sql, run, lease);
    if (taken === null) return { admission: await skip(t, sql, run, options, lease.countSkip), epoch: null };
    const { epoch } = taken;
    // Holding the lease proves that the runs under it before ended, on any host (their
    // holders stopped their commands before it could expire): admitLocked abandons the
    // rows they left running. The run starts when it took the lease.
    const admission = await admitLocked(t, sql, { ...run, startedAt: taken.at }, options);
    const key = lease.key.toString();
    if (admission.admitted) {
      await t.execute(sql.leaseRun, [admission.runId, key, epoch.toString()]);
      return { admission, epoch };
    }
    if (keepsLock(admission, options)) return { admission, epoch };
    await t.execute(sql.releaseLease, [key, epoch.toString()]);
    return { admission, epoch: null };
  });
}

// The lease if it is free (no row, or an expired one) under a new epoch, and when it was
// taken (the server's clock); null when it is held. A held one is refused on a read that locks nothing. A taker draws its epoch first:
// the counter's row lock lines takers up, so that no two hold gap locks on the leases'
// index at once (two locking reads of missing keys in one gap, each then inserting, would
// deadlock; measured: 12 jobs started at once). The row (or its gap) then stays locked to
// the end of the transaction.
async function takeLease(t: MysqlSession, sql: RunSql, run: NewRun, lease: LeaseAsk): Promise<{ epoch: bigint; at: Date } | null> {
  const key = lease.key.toString();
  const live = (rows: { live: number }[]) => rows.length > 0 && Number(rows[0]?.live) === 1;
  if (live(await t.query<{ live: number }>(sql.leaseLive, [key]))) return null;
  await t.execute(sql.drawEpoch);
  const found = await t.query<{ live: number }>(sql.leaseRow, [key]);
  if (live(found)) return null;
  const row = found[0];
  if (row) {
    const { affectedRows } = await t.execute(sql.retakeLease, [run.job, run.host, run.pid, lease.ttlMs, lease.ttlMs, key]);
    if (affectedRows === 0) return null;
  } else {
    try {
      await t.execute(sql.insertLease, [key, run.job, run.host, run.pid, lease.ttlMs, lease.ttlMs]);
    } catch (error) {
      if (serverErrno(error) === DUPLICATE) return null;
      throw error;
    }
  }
  const [taken] = await t.query<{ epoch: string; now: Date }>(sql.takenEpoch);
  return { epoch: BigInt(taken?.epoch as string), at: taken?.now as Date };
}

// A refusal for the lease counts as a skip of the run that holds it (or is parked on the
// job for its outcome, when no run is found), as a held GET_LOCK's does; a holder given
// another --max-running is refused as a disagreement, uncounted.
async function skip(t: MysqlSession, sql: RunSql, run: NewRun, options: AdmitOptions, count: boolean): Promise<Refused> {
  const [holder] = await t.query<HolderOfSlot>(sql.runningHolder, [run.job]);
  const slots = await heldDisagreement(t, sql, run, options, holder);
  if (slots) return slots;
  if (count) {
    if (holder) await t.execute(sql.countSkip, [holder.id]);
    else await t.execute(sql.park, [run.job]);
  }
  return { admitted: false, reason: 'locked', holder: toHolder(holder) };
}
