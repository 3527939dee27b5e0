import { describe } from '../../errors.js';
import { claimsOf } from '../requests.js';
import { outcomeOf, RecordRefused, RunKeyTaken, rekeyed, runOf, type SpooledRun } from '../spool-record.js';
import { isDataError } from './errors.js';
import { outcomeParams, runParams } from './rows.js';
import type { MysqlSession } from './session.js';
import type { RunSql } from './sql.js';

type Recount = (t: MysqlSession, job: string, from: string | null, to: string) => Promise<void>;

interface KeyRow {
  id: number;
  job: string;
  host: string;
  pid: number;
  invoked_at: Date | null;
  status: string;
}

// A run written while the log was out of reach, or one that never started: one row per run
// key however often it is delivered, and whether or not its start got through. A key that
// names another run's row (not the same job, host, pid and invocation; not the start, which
// the server stamps) is tried under the key made from it (rekeyed); an `abandoned` guessed
// from an old record of a run that did finish changes nothing. Then its claims are settled
// as the record says. Returns the row's id.
export async function importRecord(session: MysqlSession, sql: RunSql, record: SpooledRun, recount: Recount): Promise<number> {
  try {
    for (const runKey of [record.run.runKey, rekeyed(record)]) {
      const id = await session.transaction((t) => importUnder(t, sql, record, runKey, recount));
      if (id !== null) return id;
    }
  } catch (error) {
    throw isDataError(error) ? new RecordRefused(describe(error)) : error;
  }
  throw new RunKeyTaken(record.run.runKey);
}

async function importUnder(t: MysqlSession, sql: RunSql, record: SpooledRun, runKey: string, recount: Recount): Promise<number | null> {
  const run = { ...runOf(record), runKey };
  const outcome = outcomeOf(record);
  const [row] = await t.query<KeyRow>(sql.keyRow, [runKey]);
  let id: number;
  if (!row) {
    await t.execute(sql.ensureJob, [run.job]);
    id = (await t.execute(sql.importRun, [...runParams(run), record.childPid, ...outcomeParams(outcome, t.maxPacketBytes)])).insertId;
    await recount(t, run.job, null, outcome.status);
  } else {
    const same = row.job === run.job && row.host === run.host && row.pid === run.pid && row.invoked_at?.getTime() === run.invokedAt.getTime();
    if (!same) return null;
    id = Number(row.id);
    const stale = outcome.status === 'abandoned' && row.status !== 'running' && row.status !== 'abandoned';
    if (!stale) {
      await t.execute(sql.importOutcome, [record.childPid, ...outcomeParams(outcome, t.maxPacketBytes), id]);
      if (row.status !== outcome.status) await recount(t, run.job, row.status, outcome.status);
    }
  }
  await settleClaims(t, sql, id, record);
  return id;
}

// After a spooled record's row is written (its id): its claims settled as it says (see
// claimsOf): those its command was never given go back to `pending`; on its last attempt,
// those it served end with it.
async function settleClaims(t: MysqlSession, sql: RunSql, id: number, record: SpooledRun): Promise<void> {
  const claims = claimsOf(record);
  if (claims === null) return;
  const served = claims.served.map(Number);
  await t.execute(sql.claimsNotServed(served.length), [id, ...served]);
  if (claims.final && served.length > 0) {
    await t.execute(sql.claimsServed(served.length), [claims.status, new Date(claims.finishedAt), claims.exitCode, id, ...served]);
  }
}
