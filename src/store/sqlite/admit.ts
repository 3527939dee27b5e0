import { isUtf8 } from 'node:buffer';
import type BetterSqlite3 from 'better-sqlite3';
import type { Admission, AdmitOptions } from '../admission.js';
import { dueAfterMs } from '../jobs.js';
import { type ClaimedRequest, claimedRequest } from '../requests.js';
import type { NewRun, RunningRow } from '../types.js';
import { settleOrphans } from './claims.js';
import { pauseAt } from './pause.js';
import { SQL } from './sql.js';



// Whether one invocation may run, under a local lock already held, decided in one
// IMMEDIATE transaction (started_at: once it has the file): claims left by runs that ended (see settleOrphans), a paused job
// (or fleet),
// due requests to claim, the minimum interval and --on-request; if it may, its `running`
// row. The same rules, in the same order, as the PostgreSQL admit() function (migrations
// 0005, 0007, 0012), but for the one-run-per-tick rule: this log
// belongs to one host, and the rule is about runs of other hosts.
export function admitIn(
  db: BetterSqlite3.Database,
  given: NewRun,
  options: AdmitOptions,
  params: (run: NewRun) => Record<string, unknown>,
): Admission {
  const admit = db.transaction((): Admission => {
    // The run starts now that the log is its own: another writer may have held the file
    // for seconds (see busy.ts), the run's lock held all the while.
    const run = { ...given, startedAt: new Date() };
    const now = run.startedAt.toISOString();
    settleOrphans(db, run, options.isGone, now);
    // The job's own pause or the fleet's (a job without a row too), at this moment.
    const paused = pauseAt(db, run.job, now);
    if (paused) return { admitted: false, reason: 'disabled', paused };
    for (const row of db.prepare(SQL.runningHere).all(run.job, run.host) as RunningRow[]) {
      if (!options.isGone(row)) continue;
      db.prepare(SQL.abandon).run(now, row.id);
      db.prepare(SQL.failRequestsOf).run(now, row.id);
    }
    const requests = dueRequests(db, run.job, now, options);
    if (requests.length === 0) {
      const no = refusal(db, run, options);
      if (no) return no;
    }
    const pending = (db.prepare(SQL.pendingOverlaps).get(run.job) as { n: number } | undefined)?.n ?? 0;
    if (pending > 0) db.prepare(SQL.resetOverlaps).run(run.job);
    const trigger = requests.length > 0 ? 'request' : run.trigger;
    const row = { ...params({ ...run, trigger }), overlaps: pending, request_id: requests[0]?.id ?? null };
    const runId = Number(db.prepare(SQL.insertRun).run(row).lastInsertRowid);
    db.prepare(SQL.register).run({ job: run.job, command: run.command, host: run.host, min_interval_ms: options.minIntervalMs, started_at: run.startedAt.toISOString() });
    for (const request of requests) db.prepare(SQL.claimRequest).run({ now, run_id: runId, id: request.id });
    return { admitted: true, runId, requests, startedAt: run.startedAt };
  });
  return admit.immediate();
}

// All due requests in a --batch run (up to batchMax); otherwise every one without
// arguments and the oldest one with.
function dueRequests(db: BetterSqlite3.Database, job: string, now: string, options: AdmitOptions): ClaimedRequest[] {
  const due = (db.prepare(SQL.dueRequests).all(job, now) as { id: number; args: Buffer | null }[]).map((r) => claimedFrom(r.id, r.args));
  if (options.batch) return due.slice(0, options.batchMax ?? due.length);
  const firstWithArgs = due.find((r) => r.args.length > 0);
  return due.filter((r) => r.args.length === 0 || r === firstWithArgs);
}

// A request's args as the log holds them. SQLite cannot check that text is UTF-8, and
// cronguard passes arguments on unchanged or not at all (Node carries text, not bytes).
function claimedFrom(id: number, args: Buffer | null): ClaimedRequest {
  if (args === null) return claimedRequest(id, null);
  if (!isUtf8(args)) return { id, args: [], malformed: 'its args are not valid UTF-8, and cronguard passes arguments on unchanged or not at all' };
  try {
    return claimedRequest(id, JSON.parse(args.toString()));
  } catch {
    // Not JSON at all: a row written with the constraints off.
    return claimedRequest(id, null);
  }
}

// With nothing requested: --on-request, the interval or the stored schedule may say no.
function refusal(db: BetterSqlite3.Database, run: NewRun, options: AdmitOptions): Admission | null {
  if (options.onRequest && options.minIntervalMs === null) return { admitted: false, reason: 'idle' };
  const lastStart = () => (db.prepare(SQL.lastStart).get(run.job) as { at: string } | undefined)?.at ?? null;
  if (options.scheduled !== null && !options.manual) {
    const job = db.prepare(SQL.scheduleOf).get(run.job) as { schedule: string | null; said: string | null } | undefined;
    const last = lastStart();
    const verdict = options.scheduled.verdict(job?.schedule ?? null, job?.said ?? null, last === null ? null : Date.parse(last), run.startedAt.getTime());
    if (verdict.due) return null;
    if (verdict.refusal.warn) db.prepare(SQL.saidUnscheduled).run(run.job, run.startedAt.toISOString());
    return verdict.refusal;
  }
  const spacing = Math.max(options.minIntervalMs ?? 0, options.spacingMs ?? 0);
  if (spacing > 0 && !options.manual) {
    const last = lastStart();
    if (last !== null && Date.parse(last) > run.startedAt.getTime() - dueAfterMs(spacing)) {
      return { admitted: false, reason: 'interval', lastStartedAt: last };
    }
  }
  return null;
}
