import type BetterSqlite3 from 'better-sqlite3';
import m0001 from './migrations/0001_initial.sql';
import m0002 from './migrations/0002_ticks_and_locks.sql';
import m0003 from './migrations/0003_run_keys.sql';
import m0004 from './migrations/0004_requests.sql';
import m0005 from './migrations/0005_observability.sql';
import m0006 from './migrations/0006_blocked.sql';
import m0007 from './migrations/0007_request_errors.sql';
import m0008 from './migrations/0008_request_args.sql';
import m0009 from './migrations/0009_schedules.sql';
import m0010 from './migrations/0010_unscheduled_said.sql';
import m0011 from './migrations/0011_alerts.sql';
import m0012 from './migrations/0012_maintenance.sql';
import m0013 from './migrations/0013_stop_requests.sql';
import m0014 from './migrations/0014_alert_delivery.sql';
import m0015 from './migrations/0015_holding.sql';
import m0016 from './migrations/0016_slots.sql';

// Numbered migrations, applied in order. Append only: an applied file is never edited.
export const SQLITE_MIGRATIONS: readonly string[] = [m0001, m0002, m0003, m0004, m0005, m0006, m0007, m0008, m0009, m0010, m0011, m0012, m0013, m0014, m0015, m0016];

// Brings the schema up to date. `PRAGMA user_version` records how many migrations are in;
// the check is one cheap read on every run, and the upgrade runs under BEGIN IMMEDIATE so
// two invocations starting at once cannot both apply the same file.
export function migrateSqlite(db: BetterSqlite3.Database): number {
  const latest = SQLITE_MIGRATIONS.length;
  const version = (): number => db.pragma('user_version', { simple: true }) as number;
  const current = version();
  if (current >= latest) return current;
  db.exec('BEGIN IMMEDIATE');
  try {
    for (let v = version(); v < latest; v++) {
      db.exec(SQLITE_MIGRATIONS[v] as string);
      db.pragma(`user_version = ${v + 1}`);
    }
    db.exec('COMMIT');
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
  return latest;
}
