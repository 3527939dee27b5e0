import type { HolderRow } from '../admission.js';
import type { NewRun } from '../types.js';
import { toHolder } from './rows.js';
import type { MysqlSession, Statement } from './session.js';
import type { RunSql } from './sql.js';

// The fleet's one run per tick, as the admission (admit.ts) decides it on the job's row.

// This host's current minute, and the latest tick it believes: a claimed tick beyond it
// came from a clock running ahead.
function ahead(): Date {
  return new Date(Math.floor(Date.now() / 60_000) * 60_000 + 60_000);
}

// One run per tick (PostgreSQL 0002, 0012): the run's minute, claimed on the job's locked
// row, or null when another host has it. Ticks only move forward; the same host may claim
// again; a tick beyond this host's clock is bogus; a tick whose run neither started its
// command nor still may (its wrapper gone before) was not served and may be taken.
export async function claimTick(t: MysqlSession, sql: RunSql, run: NewRun, job: { tick: Date | null; tick_host: string | null } | null): Promise<Date | null> {
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
export async function skipForTick(t: MysqlSession, sql: RunSql, run: NewRun, writes: Statement[]) {
  const [holder] = await t.query<HolderRow>(sql.tickHolder, [run.job, run.tick, ahead(), run.host]);
  writes.push(holder ? [sql.countSkip, [holder.id]] : [sql.park, [run.job]]);
  return toHolder(holder);
}
