import { isUtf8 } from 'node:buffer';
import type BetterSqlite3 from 'better-sqlite3';
import { type Admission, type AdmitOptions, type HolderRow, toHolder } from '../admission.js';
import { decide, readsLastStart } from '../decide.js';
import { type SlotRow, stillDisagrees } from '../disagreement.js';
import { type ClaimedRequest, claimedRequest } from '../requests.js';
import type { NewRun, RunningRow } from '../types.js';
import { settleOrphans } from './claims.js';
import { pauseAt } from './pause.js';
import { SQL } from './sql.js';

// Whether one invocation may run, under a local lock already held, decided in one IMMEDIATE
// transaction (started_at: once it has the file): claims left by runs that ended are settled
// (see settleOrphans), what the rule needs is read, decide() applies it, and if the run may
// start its `running` row is written. The fleet's one run per tick does not apply: this log
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
    if (!paused) {
      for (const row of db.prepare(SQL.runningHere).all(run.job, run.host) as RunningRow[]) {
        if (!options.isGone(row, run)) continue;
        db.prepare(SQL.abandon).run(now, row.id);
        db.prepare(SQL.failRequestsOf).run(now, row.id);
      }
    }
    // A paused job's gone rows are not abandoned above, and are not counted either. The
    // locks of the fleet's database need its log, so no row here is under one.
    const others = db.prepare(SQL.otherSlots).all(run.job, run.maxRunning) as (HolderRow & SlotRow)[];
    const other = others.find((r) => stillDisagrees(r, run, options.isGone, () => true));
    if (other) return { admitted: false, reason: 'slots', holder: toHolder(other), maxRunning: other.max_running ?? 1 };
    const job = options.scheduled !== null ? (db.prepare(SQL.scheduleOf).get(run.job) as { schedule: string | null; said: string | null } | undefined) : undefined;
    const decision = decide(
      {
        paused,
        due: paused ? [] : dueRequests(db, run.job, now),
        lastStart: readsLastStart(options) ? ((db.prepare(SQL.lastStart).get(run.job) as { at: string } | undefined)?.at ?? null) : null,
        schedule: job?.schedule ?? null,
        saidAt: job?.said ?? null,
      },
      run.startedAt.getTime(),
      options,
    );
    if (!decision.admitted) {
      if (decision.warn) db.prepare(SQL.saidUnscheduled).run(run.job, now);
      return decision;
    }
    const { requests } = decision;
    const pending = (db.prepare(SQL.pendingOverlaps).get(run.job) as { n: number } | undefined)?.n ?? 0;
    if (pending > 0) db.prepare(SQL.resetOverlaps).run(run.job);
    const trigger = requests.length > 0 ? 'request' : run.trigger;
    const row = { ...params({ ...run, trigger }), overlaps: pending, request_id: requests[0]?.id ?? null };
    const runId = Number(db.prepare(SQL.insertRun).run(row).lastInsertRowid);
    db.prepare(SQL.register).run({ job: run.job, command: run.command, host: run.host, min_interval_ms: options.minIntervalMs, started_at: now });
    for (const request of requests) db.prepare(SQL.claimRequest).run({ now, run_id: runId, id: request.id });
    return { admitted: true, runId, requests, startedAt: run.startedAt };
  });
  return admit.immediate();
}

// The job's requests due now, oldest first.
function dueRequests(db: BetterSqlite3.Database, job: string, now: string): ClaimedRequest[] {
  return (db.prepare(SQL.dueRequests).all(job, now) as { id: number; args: Buffer | null }[]).map((r) => claimedFrom(r.id, r.args));
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
