import { inDatabase } from '../../lock/lock-spec.js';
import { type Admission, type AdmitOptions, type HolderRow, keepsLock, type Refused } from '../admission.js';
import { decide, readsLastStart } from '../decide.js';
import { disagrees, stillDisagrees } from '../disagreement.js';
import { type ClaimedRequest, claimedRequest } from '../requests.js';
import type { NewRun, RunningRow, UnsettledRun } from '../types.js';
import { type PauseRow, toPaused } from './pause.js';
import { iso, parseJson, runParams, toHolder } from './rows.js';
import type { Answer, MysqlSession, Statement } from './session.js';
import { LOCK_SQL, type RunSql } from './sql.js';
import { claimTick, skipForTick, type TickClaim, type TickSlot, tickSlots, tickWrites } from './ticks.js';

interface JobRow {
  disabled: number;
  reason: string | null;
  since: Date | string | null;
  by: string | null;
  until: Date | string | null;
  tick: Date | null;
  tick_host: string | null;
  schedule: string | null;
  said: Date | string | null;
}

// GET_LOCK asked in the admission's first packet (MysqlStore.lockAndAdmit). `asked`: a packet
// asking it went out, so its answer is in the session (LOCK_SQL.got) and a retry reads that
// rather than asking again (which would answer 2, "held before").
export interface AdmissionLock {
  readonly name: string;
  asked: boolean;
}

// What the admission found: GET_LOCK's answer (null: none asked) and the admission; when
// another session holds the name, no admission but the run holding it.
export type Admitted =
  | { readonly got: number | null; readonly admission: Admission }
  | { readonly got: number | null; readonly admission: null; readonly holder: HolderOfSlot | undefined };

// A run the admission may settle, or whose --max-running it holds this one's to.
export type UnsettledRow = UnsettledRun & HolderRow & { readonly max_running: number | null };

// The run holding a lock another session holds (sql.runningHolder): the job's newest running one.
export type HolderOfSlot = UnsettledRow;

// What the first packet reads, under the job's row lock.
interface Found {
  readonly job: JobRow | undefined;
  // The fleet's pause row (held: it holds now).
  readonly fleet: (PauseRow & { held: number | null }) | undefined;
  readonly unsettled: readonly UnsettledRow[];
  readonly due: readonly { id: number; args: string }[];
  readonly last: { at: Date } | undefined;
  // The ticks of the job's slots past the first (none read: N = 1, or no tick to claim).
  readonly slotTicks: readonly TickSlot[];
}

// Whether one invocation may run, under its lock (GET_LOCK, or a local lock), decided in one
// transaction that first locks the job's row: the same rules in the same order as
// PostgreSQL's admit() (migrations 0011-0013) and the embedded log's admitIn. Hosts holding
// no common lock meet on that row, so the interval and the fleet's one run per tick are
// decided one host at a time, each on what the one before it committed.
//
// In two round trips as a rule: GET_LOCK, BEGIN and the reads in one packet; the decision
// here; its writes, COMMIT and a RELEASE_LOCK in the next. Rarer cases take one more (a job's
// first run, runs to settle, a tick another host holds). Deadlocks and lock wait timeouts
// run it all again (MysqlSession.batchedTransaction).
export function admitIn(session: MysqlSession, sql: RunSql, given: NewRun, options: AdmitOptions, lock: AdmissionLock | null = null): Promise<Admitted> {
  return session.batchedTransaction(async (): Promise<Admitted> => {
    const take: Statement[] = lock === null ? [] : lock.asked ? [[LOCK_SQL.got, []]] : [[LOCK_SQL.takeInto, [lock.name, lock.name]], [LOCK_SQL.got, []]];
    if (lock) lock.asked = true;
    const first = await session.batch([...take, [sql.lockedAt, []], ['BEGIN', []], ...reads(sql, given, options, lock?.name ?? null)]);
    const answer = (first[take.length - 1]?.rows[0] as { got: number | string | null } | undefined)?.got;
    // It starts when it got its lock (a local one: before this packet), on the server's clock.
    const run = { ...given, startedAt: (first[take.length]?.rows[0] as { now: Date } | undefined)?.now ?? given.startedAt };
    const got = lock === null || answer === null || answer === undefined ? null : Number(answer);
    if (lock !== null && got !== 1 && got !== 2) {
      // Another session's name: nothing was locked (UNDER_LOCK); the run holding it is asked for the skip.
      const [, holder] = await session.batch([['ROLLBACK', []], [sql.runningHolder, [run.job]]]);
      return { got, admission: null, holder: holder?.rows[0] as HolderOfSlot | undefined };
    }
    let found = foundIn(first.slice(take.length + 2), run, options);
    // A job's first run: its row is made, which takes its lock at once (see sql.lockJob), in
    // a transaction begun again, so that what it reads is read after that (the first one's
    // snapshot was taken before).
    if (found.job === undefined) {
      const again = await session.batch([['ROLLBACK', []], ['BEGIN', []], [sql.lockJob, [run.job]], ...reads(sql, run, options, null)]);
      found = foundIn(again.slice(3), run, options);
    }
    const writes: Statement[] = [];
    const decided = await admitFound(session, sql, run, options, found, writes);
    const refused = 'reason' in decided ? decided : null;
    const plan = 'reason' in decided ? null : decided;
    const inserted = writes.length;
    if (plan) writes.push(...runWrites(sql, run, options, plan));
    writes.push(['COMMIT', []]);
    // A refused admission frees a name it took (a run keeps it); one this session held before (2) is not its to free.
    if (lock && got === 1 && refused && !keepsLock(refused, options)) writes.push([LOCK_SQL.release, [lock.name]]);
    const answers = await session.batch(writes);
    if (!plan) return { got, admission: refused as Refused };
    return { got, admission: { admitted: true, runId: (answers[inserted] as Answer).insertId, requests: plan.requests, startedAt: run.startedAt } };
  });
}

// The admission's rules in transaction `t` once the job's row is locked (sql.lockJob), for a
// lock taken in that transaction before them (a lease: lease-admit.ts).
export async function admitLocked(t: MysqlSession, sql: RunSql, run: NewRun, options: AdmitOptions): Promise<Admission> {
  const found = foundIn(await t.batch(reads(sql, run, options, null)), run, options);
  const writes: Statement[] = [];
  const decided = await admitFound(t, sql, run, options, found, writes);
  if ('reason' in decided) {
    if (writes.length > 0) await t.batch(writes);
    return decided;
  }
  const inserted = writes.length;
  const answers = await t.batch([...writes, ...runWrites(sql, run, options, decided)]);
  return { admitted: true, runId: (answers[inserted] as Answer).insertId, requests: decided.requests, startedAt: run.startedAt };
}

// The run's row, its claims (of the run just inserted: LAST_INSERT_ID()), its job's row and
// the tick it claimed.
function runWrites(sql: RunSql, run: NewRun, options: AdmitOptions, plan: { requests: readonly ClaimedRequest[]; tick: TickClaim | null }): Statement[] {
  const trigger = plan.requests.length > 0 ? 'request' : run.trigger;
  const writes: Statement[] = [[sql.insertRun, [plan.requests[0]?.id ?? null, ...runParams({ ...run, trigger })]]];
  const ids = plan.requests.map((r) => r.id);
  if (ids.length > 0) writes.push([sql.claim(ids.length), ids]);
  // The first slot's tick is the job row's. Another's is written last before the COMMIT, as
  // every admission writes it: a wait on that table (a claim of another job's beside it) is
  // on a transaction about to commit, never on one that waits for this one in turn.
  const tick = plan.tick?.slot === 0 ? plan.tick.tick : null;
  writes.push([sql.register, [run.command, run.host, options.minIntervalMs, run.startedAt, tick, tick && run.host, run.job]], ...tickWrites(sql, run, plan.tick));
  return writes;
}

// The first packet's reads (see Found); `name`: the GET_LOCK asked before them, under which
// their locking reads are (sql.ts UNDER_LOCK).
function reads(sql: RunSql, run: NewRun, options: AdmitOptions, name: string | null): Statement[] {
  const statements: Statement[] = [[sql.jobRow, [name, run.job]], [sql.admissionFleet, []], [sql.unsettled, [run.job, run.job]], ...changing(sql, run, options, name)];
  if (readsSlotTicks(run, options)) statements.push([sql.slotTicks, [run.job, run.maxRunning]]);
  return statements;
}

// The reads that settling runs may change, read again after it: due requests, last start.
function changing(sql: RunSql, run: NewRun, options: AdmitOptions, name: string | null): Statement[] {
  const statements: Statement[] = [[sql.dueRequests, [name, run.job]]];
  if (readsLastStart(options)) statements.push([sql.lastStart, [run.job]]);
  return statements;
}

// A job of one slot keeps its tick in its row alone: a plain admission reads nothing more.
function readsSlotTicks(run: NewRun, options: AdmitOptions): boolean {
  return run.maxRunning > 1 && options.oneRunPerTick && run.tick !== null;
}

function foundIn(answers: readonly Answer[], run: NewRun, options: AdmitOptions): Found {
  const [job, fleet, unsettled, due, ...rest] = answers.map((a) => a.rows);
  const last = readsLastStart(options) ? rest.shift() : undefined;
  const slotTicks = readsSlotTicks(run, options) ? rest.shift() : undefined;
  return {
    job: job?.[0] as JobRow | undefined,
    fleet: fleet?.[0] as Found['fleet'],
    unsettled: (unsettled ?? []) as UnsettledRow[],
    due: (due ?? []) as Found['due'],
    last: last?.[0] as Found['last'],
    slotTicks: (slotTicks ?? []) as TickSlot[],
  };
}

// A running copy of the job given another --max-running than `run` that may still run (see
// stillDisagrees; `free`: the rows whose database lock nobody holds now, see freeLocks): all
// copies of a job must agree on N, or each would count the others' slots wrong. Null when
// none disagrees.
export function disagreement(rows: readonly UnsettledRow[], run: NewRun, options: AdmitOptions, free: ReadonlySet<number>): Refused | null {
  const other = rows.find((r) => disagrees(r, run) && stillDisagrees(r, run, options.isGone, (row) => !free.has(Number(row.id))));
  return other ? { admitted: false, reason: 'slots', holder: toHolder(other), maxRunning: other.max_running ?? 1 } : null;
}

// When the lock is another's: a refusal as the disagreement it is when the job's newest
// running copy (`holder`) was given another N and may still run, which no free slot of this N
// would find when all are held. Its lock is asked only then.
export async function heldDisagreement(t: MysqlSession, sql: RunSql, run: NewRun, options: AdmitOptions, holder: HolderOfSlot | undefined): Promise<Refused | null> {
  if (!holder || !disagrees(holder, run)) return null;
  return disagreement([holder], run, options, await freeLocks(t, sql, run, [holder]));
}

// Of `rows`, the running ones given another N under a lock of this server (GET_LOCK, a lease)
// that nobody holds now: the wrapper that held it has ended, or lost it (a lost lease is never
// renewed, a GET_LOCK name is only taken before a run's row is written), and its run was
// inserted under that lock, which its outcome lets go only after its COMMIT. Asked in a round
// trip of its own, only when there are such rows: a lease by a locking read (the newest
// renewal, not this transaction's snapshot).
export async function freeLocks(t: MysqlSession, sql: RunSql, run: NewRun, rows: readonly UnsettledRow[]): Promise<Set<number>> {
  const asked = rows.filter((r) => r.status === 'running' && disagrees(r, run) && r.lock_key !== null && (r.lock_backend === 'mysql' || r.lock_backend === 'lease'));
  if (asked.length === 0) return new Set();
  const answers = await t.batch(asked.map((r): Statement => (r.lock_backend === 'mysql' ? [LOCK_SQL.used, [r.lock_key]] : [sql.leaseHeld, [r.lock_key]])));
  const held = (a: Answer | undefined) => Number((a?.rows[0] as { held: number | string | null } | undefined)?.held ?? 0) === 1;
  return new Set(asked.filter((_, i) => !held(answers[i])).map((r) => Number(r.id)));
}

// The admission's decision on what the first packet found (decide() applies the rule,
// after the runs it proves ended are settled), then the fleet's one run per tick: a
// refusal, or the requests and tick of the run to insert. Writes it needs go to `writes`
// (sent with the COMMIT).
async function admitFound(
  t: MysqlSession,
  sql: RunSql,
  run: NewRun,
  options: AdmitOptions,
  found: Found,
  writes: Statement[],
): Promise<Refused | { requests: readonly ClaimedRequest[]; tick: TickClaim | null }> {
  const { job } = found;
  // The job's own pause, else the fleet's (a job without a row too).
  const paused =
    job && Number(job.disabled) === 1 ? toPaused(job, false) : found.fleet && Number(found.fleet.held) === 1 ? toPaused(found.fleet, true) : null;
  const free = await freeLocks(t, sql, run, found.unsettled);
  const settled = paused ? found : await settle(t, sql, run, options, found, writes, free);
  // Before the pause, as the embedded log: a disagreement is a mistake to say at once.
  const slots = disagreement(settled.unsettled.filter((r) => r.status === 'running'), run, options, free);
  if (slots) return slots;
  const decision = decide(
    {
      paused,
      due: settled.due.map((r) => claimedRequest(Number(r.id), parseJson(r.args))),
      lastStart: settled.last ? iso(settled.last.at) : null,
      schedule: job?.schedule ?? null,
      saidAt: iso(job?.said ?? null),
    },
    run.startedAt.getTime(),
    options,
  );
  if (!decision.admitted) {
    if (decision.warn) writes.push([sql.saidUnscheduled, [run.startedAt, run.job]]);
    return decision;
  }
  const { requests } = decision;
  let tick: TickClaim | null = null;
  if (options.oneRunPerTick && run.tick !== null) {
    tick = await claimTick(t, sql, run, tickSlots(job ?? null, found.slotTicks, run.maxRunning));
    if (tick === null && requests.length === 0) return { admitted: false, reason: 'tick', holder: await skipForTick(t, sql, run, writes) };
  }
  return { requests, tick };
}

// The job's runs that this admission proves ended: `running` rows left by a wrapper that
// vanished are abandoned (their requests fail with them), and the claims of finished runs
// whose wrapper vanished between attempts are settled. Proven by a database lock held
// (holding one proves that every run under it before has ended, on any host), by one nobody
// holds for a running copy given another N (`free`, see freeLocks: its slot may be one no
// copy takes any more), or by `isGone` for this host's rows under other locks. Rare, so in a round
// trip of its own, which reads again what it changes: the requests due (some may be
// pending again) and the last start (not an abandoned run's); the runs it abandoned are
// no longer found running.
async function settle(t: MysqlSession, sql: RunSql, run: NewRun, options: AdmitOptions, found: Found, writes: Statement[], free: ReadonlySet<number>): Promise<Found> {
  const rows = found.unsettled;
  const fleet = inDatabase(run.lockBackend);
  const ended = (r: UnsettledRun): boolean =>
    (r.lock_backend === null && fleet) ||
    (r.status === 'running' && free.has(Number(r.id))) ||
    (r.lock_backend === run.lockBackend && r.lock_key !== null && r.lock_key === run.lockKey && (fleet || r.host === run.host)) ||
    (r.host === run.host && options.isGone(r as RunningRow, run));
  const gone = rows.filter((r) => r.status === 'running' && ended(r)).map((r) => Number(r.id));
  // Not this wrapper's own earlier runs (a loop's), whose claims it settles itself.
  const own = (r: UnsettledRun) => r.host === run.host && r.pid === run.pid && r.wrapper_start === run.wrapperStart;
  const orphaned = rows.filter((r) => r.status !== 'running' && !own(r) && ended(r)).map((r) => Number(r.id));
  if (gone.length === 0 && orphaned.length === 0) return found;
  const statements: Statement[] = [];
  if (gone.length > 0) statements.push([sql.abandon(gone.length), gone], [sql.failRequestsOf(gone.length), gone]);
  if (orphaned.length > 0) statements.push([sql.claimsUnstarted(orphaned.length), orphaned], [sql.claimsCut(orphaned.length), orphaned]);
  const answers = await t.batch([...statements, ...changing(sql, run, options, null)]);
  const abandoned = gone.length > 0 ? (answers[0] as Answer).affectedRows : 0;
  if (abandoned > 0) writes.push([sql.count, [run.job, 'abandoned', abandoned, abandoned]]);
  const [due, last] = answers.slice(statements.length).map((a) => a.rows);
  const unsettled = rows.filter((r) => !gone.includes(Number(r.id)));
  return { ...found, unsettled, due: (due ?? []) as Found['due'], last: readsLastStart(options) ? (last?.[0] as Found['last']) : undefined };
}
