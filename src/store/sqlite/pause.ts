import type BetterSqlite3 from 'better-sqlite3';
import type { Paused, PauseEvent } from '../jobs.js';
import { SQL } from './sql.js';

// Pauses in the embedded log (migration 0011): a job's own (jobs.disabled, until
// disabled_until), the fleet's (the one row of fleet_pause), and the events that keep who
// paused and resumed what (SQL in sql.ts). Times are ISO-8601 UTC text, so they
// compare as text; `now` is this host's clock, which is the embedded log's.

// The pause an admission at `now` finds: the job's own, else the fleet's.
export function pauseAt(db: BetterSqlite3.Database, job: string, now: string): Paused | null {
  const own = db.prepare(SQL.paused).get(job, now) as Paused | undefined;
  if (own) return { ...own, fleet: false };
  return fleetPauseAt(db, now);
}

export function fleetPauseAt(db: BetterSqlite3.Database, now: string): Paused | null {
  const fleet = db.prepare(SQL.fleetPause).get(now) as Paused | undefined;
  return fleet ? { ...fleet, fleet: true } : null;
}

// Pauses or resumes a job (`job`) or the fleet (null), with its event, in one transaction;
// whether anything changed (a resume of what is not paused keeps no event).
export function setPauseIn(db: BetterSqlite3.Database, job: string | null, paused: Paused | null, by: string, at: string): boolean {
  const change = db.transaction((): boolean => {
    if (paused) {
      const values = { reason: paused.reason, since: paused.since, by: paused.by, until: paused.until ?? null };
      if (job === null) db.prepare(SQL.pauseFleet).run(values);
      else db.prepare(SQL.pause).run({ ...values, job });
      db.prepare(SQL.pauseEvent).run({ job, action: 'pause', at: paused.since ?? at, by: paused.by ?? by, reason: paused.reason, until: paused.until ?? null });
      return true;
    }
    const resumed = job === null ? db.prepare(SQL.resumeFleet).run(new Date().toISOString()) : db.prepare(SQL.resume).run(job);
    if (resumed.changes === 0) return false;
    db.prepare(SQL.pauseEvent).run({ job, action: 'resume', at, by, reason: null, until: null });
    return true;
  });
  return change.immediate();
}

export function pauseEventsIn(db: BetterSqlite3.Database, job: string, limit: number): PauseEvent[] {
  return (db.prepare(SQL.pauseEvents).all(job, limit) as Omit<PauseEvent, 'fleet_wide'>[]).map((e) => ({ ...e, fleet_wide: e.job === null }));
}
