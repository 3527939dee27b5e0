import type { Paused, PauseEvent } from '../jobs.js';
import { iso, type Time } from './rows.js';
import type { MysqlSession } from './session.js';
import type { pauseSql } from './sql-reads.js';

// Pauses in MySQL/MariaDB (migration 0005): a job's own (jobs.disabled, until
// disabled_until), the fleet's (the one row of fleet_pause), and the events that keep who
// paused and resumed what (SQL in sql-reads.ts). Times are UTC on the server's clock.
type PauseSql = ReturnType<typeof pauseSql>;

export interface PauseRow {
  reason: string | null;
  since: Time;
  by: string | null;
  until: Time;
}

export function toPaused(row: PauseRow, fleet: boolean): Paused {
  return { reason: row.reason, since: iso(row.since), by: row.by, until: iso(row.until), fleet };
}

export async function fleetPauseOf(session: MysqlSession, sql: PauseSql): Promise<Paused | null> {
  const [row] = await session.query<PauseRow>(sql.fleet);
  return row ? toPaused(row, true) : null;
}

// Pauses or resumes a job (`job`) or the fleet (null), with its event, in one transaction;
// whether anything changed (a resume of what is not paused keeps no event).
export function setPauseIn(session: MysqlSession, sql: PauseSql, job: string | null, paused: Paused | null, by: string, at: string): Promise<boolean> {
  const time = (t: string | null | undefined) => (t ? new Date(t) : null);
  return session.transaction(async (t) => {
    if (paused) {
      const values = [paused.reason, time(paused.since), paused.by, time(paused.until)];
      if (job === null) await t.execute(sql.pauseFleet, values);
      else await t.execute(sql.pause, [job, ...values, ...values]);
      await t.execute(sql.event, [job, 'pause', time(paused.since) ?? new Date(at), paused.by ?? by, paused.reason, time(paused.until)]);
      return true;
    }
    const resumed = job === null ? await t.execute(sql.resumeFleet, []) : await t.execute(sql.resume, [job]);
    if (resumed.affectedRows === 0) return false;
    await t.execute(sql.event, [job, 'resume', new Date(at), by, null, null]);
    return true;
  });
}

export async function pauseEventsOf(session: MysqlSession, sql: PauseSql, job: string, limit: number): Promise<PauseEvent[]> {
  const rows = await session.query<{ id: number | string; job: string | null; action: string; at: Time; by: string; reason: string | null; until: Time }>(sql.events, [job, limit]);
  return rows.map((r) => ({ id: Number(r.id), job: r.job, action: r.action as PauseEvent['action'], at: iso(r.at) as string, by: r.by, reason: r.reason, until: iso(r.until), fleet_wide: r.job === null }));
}
