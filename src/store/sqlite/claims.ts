import type BetterSqlite3 from 'better-sqlite3';
import type { AdmitOptions } from '../admission.js';
import { claimsOf } from '../requests.js';
import type { SpooledRun } from '../spool-record.js';
import type { NewRun, RunningRow } from '../types.js';
import { SQL } from './sql.js';

// Requests whose run ended without its last attempt: no `running` row is left for an
// admission to abandon (the wrapper died while it waited to retry, having finished its
// attempt's row), so they would stay `running` for ever. Under the job's lock, the
// admission settles those whose wrapper is gone (`isGone`, as for a `running` row): a
// request its run never started the command for goes back to `pending` (this admission may
// claim it); one it did ends `failed`, with the last attempt's exit code and why: its
// command ran for it, and another run would serve it twice.
export function settleOrphans(db: BetterSqlite3.Database, run: NewRun, isGone: AdmitOptions['isGone'], now: string): void {
  const here = { job: run.job, host: run.host, pid: run.pid, wrapper_start: run.wrapperStart };
  for (const row of db.prepare(SQL.orphanedHere).all(here) as RunningRow[]) {
    if (!isGone(row, run)) continue;
    db.prepare(SQL.claimsUnstarted).run({ id: row.id });
    db.prepare(SQL.claimsCut).run({ id: row.id, now });
  }
}

// After a spooled record's row is written (its id): its claims settled as it says (see
// claimsOf). Returns the id.
export function withClaimsSettled(db: BetterSqlite3.Database, id: number, record: SpooledRun): number {
  const claims = claimsOf(record);
  if (claims === null) return id;
  const served = JSON.stringify(claims.served);
  db.transaction(() => {
    db.prepare(SQL.claimsNotServed).run({ id, served });
    if (claims.final) db.prepare(SQL.claimsServed).run({ id, served, status: claims.status, finished_at: claims.finishedAt, exit_code: claims.exitCode });
  }).immediate();
  return id;
}
