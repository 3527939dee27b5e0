import { dueAfterMs } from '../jobs.js';
import { type ClaimedRequest, claimedRequest } from '../requests.js';
import type { Admission, AdmitOptions, NewRun, RunningRow, UnsettledRun } from '../types.js';
import { type HolderRow, iso, parseJson, runParams, toHolder } from './rows.js';
import type { MysqlSession } from './session.js';
import type { RunSql } from './sql.js';

// Database locks: holding one proves that every run under it before has ended, on any host
// (a local lock proves it for this host's runs only).
export const FLEET_LOCKS: ReadonlySet<string> = new Set(['mysql', 'lease']);

interface JobRow {
  disabled: number;
  reason: string | null;
  since: Date | string | null;
  by: string | null;
  tick: Date | null;
  tick_host: string | null;
}

// Whether one invocation may run, under its lock (GET_LOCK, or a local lock), decided in one
// transaction that first locks the job's row: the same rules in the same order as
// PostgreSQL's admit() (migrations 0011-0013) and the embedded log's admitIn. Hosts holding
// no common lock meet on that row, so the interval and the fleet's one run per tick are
// decided one host at a time, each on what the one before it committed. Deadlocks and lock
// wait timeouts are tried again by the session (MysqlSession.transaction).
export function admitIn(session: MysqlSession, sql: RunSql, run: NewRun, options: AdmitOptions): Promise<Admission> {
  return session.transaction(async (t): Promise<Admission> => {
    await t.query(sql.lockJob, [run.job]);
    return admitLocked(t, sql, run, options);
  });
}

// The admission's rules, in transaction `t` once the job's row is locked (lockJob).
export async function admitLocked(t: MysqlSession, sql: RunSql, run: NewRun, options: AdmitOptions): Promise<Admission> {
  const [job] = await t.query<JobRow>(sql.jobRow, [run.job]);
  if (job && Number(job.disabled) === 1) {
    return { admitted: false, reason: 'disabled', paused: { reason: job.reason, since: iso(job.since), by: job.by } };
  }
  await settle(t, sql, run, options);
  const requests = await dueRequests(t, sql, run.job, options);
  if (requests.length === 0) {
    const no = await refusal(t, sql, run, options);
    if (no) return no;
  }
  let tick: Date | null = null;
  if (options.oneRunPerTick && run.tick !== null) {
    tick = await claimTick(t, sql, run, job ?? null);
    if (tick === null && requests.length === 0) return { admitted: false, reason: 'tick', holder: await skipForTick(t, sql, run) };
  }
  const trigger = requests.length > 0 ? 'request' : run.trigger;
  const { insertId: runId } = await t.execute(sql.insertRun, [requests[0]?.id ?? null, ...runParams({ ...run, trigger })]);
  const ids = requests.map((r) => r.id);
  if (ids.length > 0) await t.execute(sql.claim(ids.length), [runId, ...ids]);
  await t.execute(sql.register, [run.command, run.host, options.minIntervalMs, run.startedAt, tick, tick && run.host, run.job]);
  return { admitted: true, runId, requests };
}

// The job's runs that this admission proves ended: `running` rows left by a wrapper that
// vanished are abandoned (their requests fail with them), and the claims of finished runs
// whose wrapper vanished between attempts are settled. Proven by the lock held (see
// FLEET_LOCKS), or by `isGone` for this host's rows under other locks.
async function settle(t: MysqlSession, sql: RunSql, run: NewRun, options: AdmitOptions): Promise<void> {
  const rows = await t.query<UnsettledRun>(sql.unsettled, [run.job, run.job]);
  const fleet = FLEET_LOCKS.has(run.lockBackend);
  const ended = (r: UnsettledRun): boolean =>
    (r.lock_backend === null && fleet) ||
    (r.lock_backend === run.lockBackend && r.lock_key !== null && r.lock_key === run.lockKey && (fleet || r.host === run.host)) ||
    (r.host === run.host && options.isGone(r as RunningRow));
  const gone = rows.filter((r) => r.status === 'running' && ended(r)).map((r) => Number(r.id));
  if (gone.length > 0) {
    const { affectedRows } = await t.execute(sql.abandon(gone.length), gone);
    await t.execute(sql.failRequestsOf(gone.length), gone);
    if (affectedRows > 0) await t.execute(sql.count, [run.job, 'abandoned', affectedRows, affectedRows]);
  }
  // Not this wrapper's own earlier runs (a loop's), whose claims it settles itself.
  const own = (r: UnsettledRun) => r.host === run.host && r.pid === run.pid && r.wrapper_start === run.wrapperStart;
  const orphaned = rows.filter((r) => r.status !== 'running' && !own(r) && ended(r)).map((r) => Number(r.id));
  if (orphaned.length > 0) {
    await t.execute(sql.claimsUnstarted(orphaned.length), orphaned);
    await t.execute(sql.claimsCut(orphaned.length), orphaned);
  }
}

// All due requests in a --batch run (up to batchMax); otherwise every one without arguments
// and the oldest one with.
async function dueRequests(t: MysqlSession, sql: RunSql, job: string, options: AdmitOptions): Promise<ClaimedRequest[]> {
  const due = (await t.query<{ id: number; args: string }>(sql.dueRequests, [job])).map((r) => claimedRequest(Number(r.id), parseJson(r.args)));
  if (options.batch) return due.slice(0, options.batchMax ?? due.length);
  const firstWithArgs = due.find((r) => r.args.length > 0);
  return due.filter((r) => r.args.length === 0 || r === firstWithArgs);
}

// With nothing requested: --on-request or the interval may say no.
async function refusal(t: MysqlSession, sql: RunSql, run: NewRun, options: AdmitOptions): Promise<Admission | null> {
  if (options.onRequest && options.minIntervalMs === null) return { admitted: false, reason: 'idle' };
  if (options.minIntervalMs !== null && !options.manual) {
    const [last] = await t.query<{ at: Date }>(sql.lastStart, [run.job]);
    if (last && last.at.getTime() > run.startedAt.getTime() - dueAfterMs(options.minIntervalMs)) {
      return { admitted: false, reason: 'interval', lastStartedAt: iso(last.at) as string };
    }
  }
  return null;
}

// This host's current minute, and the latest tick it believes: a claimed tick beyond it
// came from a clock running ahead.
function ahead(): Date {
  return new Date(Math.floor(Date.now() / 60_000) * 60_000 + 60_000);
}

// One run per tick (PostgreSQL 0002, 0012): the run's minute, claimed on the job's locked
// row, or null when another host has it. Ticks only move forward; the same host may claim
// again; a tick beyond this host's clock is bogus; a tick whose run neither started its
// command nor still may (its wrapper gone before) was not served and may be taken.
async function claimTick(t: MysqlSession, sql: RunSql, run: NewRun, job: JobRow | null): Promise<Date | null> {
  const mine = run.tick as Date;
  const held = job?.tick ?? null;
  const bogus = held !== null && held.getTime() > ahead().getTime();
  let free = held === null || bogus || mine.getTime() > held.getTime() || job?.tick_host === run.host;
  if (!free) free = (await t.query(sql.tickServed, [run.job, held, job?.tick_host])).length === 0;
  if (!free) return null;
  return held === null || bogus || mine.getTime() > held.getTime() ? mine : held;
}

// A refusal for the tick counts as a skip of the other host's run that had it (or is parked
// on the job, when that run cannot be found).
async function skipForTick(t: MysqlSession, sql: RunSql, run: NewRun) {
  const [holder] = await t.query<HolderRow>(sql.tickHolder, [run.job, run.tick, ahead(), run.host]);
  if (holder) await t.execute(sql.countSkip, [holder.id]);
  else await t.execute(sql.park, [run.job]);
  return toHolder(holder);
}
