import type { HolderRow } from '../admission.js';
import type { NewRun } from '../types.js';
import { toHolder } from './rows.js';
import type { MysqlSession, Statement } from './session.js';
import type { RunSql } from './sql.js';

// The fleet's rule of starts per tick, as the admission (admit.ts) decides it on the job's row.

// A job's claim on a minute: which of its N tick slots, the minute claimed and by which host.
export interface TickSlot {
  readonly slot: number;
  readonly tick: Date | null;
  readonly tick_host: string | null;
}

// What a run claims: a slot's tick (the one to write), or null when all are taken.
export interface TickClaim {
  readonly slot: number;
  readonly tick: Date;
}

// A job of N slots (--max-running) has N ticks to claim: at most N starts a minute across
// the fleet. The first is the job's row's (`job`); the others slot_ticks' rows (`others`,
// migration 0010), a missing one unclaimed. A tick slot is not the slot of the lock the run
// holds: hosts holding locks of their own (flock with this log) all hold slot 0, and a quick
// run frees its lock slot for the next host in the same minute; either way the minute's
// other N-1 starts are still the job's to make.
export function tickSlots(job: { tick: Date | null; tick_host: string | null } | null, others: readonly TickSlot[], n: number): TickSlot[] {
  const first = { slot: 0, tick: job?.tick ?? null, tick_host: job?.tick_host ?? null };
  return [first, ...Array.from({ length: n - 1 }, (_, i) => others.find((o) => o.slot === i + 1) ?? { slot: i + 1, tick: null, tick_host: null })];
}

// This host's current minute, and the latest tick it believes: a claimed tick beyond it
// came from a clock running ahead.
function ahead(): Date {
  return new Date(Math.floor(Date.now() / 60_000) * 60_000 + 60_000);
}

// One run per tick slot (PostgreSQL 0002, 0012): the run's minute, claimed on the job's
// locked row, or null when other hosts have every slot's. Ticks only move forward; the same
// host may claim again; a tick beyond this host's clock is bogus; a tick whose run neither
// started its command nor still may (its wrapper gone before) was not served and may be
// taken. A slot free at a glance is taken first; one held is looked into only when none is.
export async function claimTick(t: MysqlSession, sql: RunSql, run: NewRun, slots: readonly TickSlot[]): Promise<TickClaim | null> {
  const mine = run.tick as Date;
  const later = (held: Date | null) => held === null || held.getTime() > ahead().getTime() || mine.getTime() > held.getTime();
  const claim = ({ slot, tick }: TickSlot): TickClaim => ({ slot, tick: later(tick) ? mine : (tick as Date) });
  const free = slots.find((s) => later(s.tick) || s.tick_host === run.host);
  if (free) return claim(free);
  for (const held of slots) {
    if ((await t.query(sql.tickServed, [run.job, held.tick, held.tick_host])).length === 0) return claim(held);
  }
  return null;
}

// The statements that record a claim: the first slot's on the job's row (sql.register),
// another's in slot_ticks.
export function tickWrites(sql: RunSql, run: NewRun, claim: TickClaim | null): Statement[] {
  if (claim === null || claim.slot === 0) return [];
  const { slot, tick } = claim;
  return [[sql.claimSlotTick, [run.job, slot, tick, run.host, tick, run.host]]];
}

// A refusal for the tick counts as a skip of the other host's run that had it (or is parked
// on the job, when that run cannot be found).
export async function skipForTick(t: MysqlSession, sql: RunSql, run: NewRun, writes: Statement[]) {
  const [holder] = await t.query<HolderRow>(sql.tickHolder, [run.job, run.tick, ahead(), run.host]);
  writes.push(holder ? [sql.countSkip, [holder.id]] : [sql.park, [run.job]]);
  return toHolder(holder);
}
