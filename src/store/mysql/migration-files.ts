import m0001 from './migrations/0001_initial.sql';
import m0002 from './migrations/0002_leases.sql';
import m0003 from './migrations/0003_schedules.sql';
import m0004 from './migrations/0004_unscheduled_said.sql';
import m0005 from './migrations/0005_alerts.sql';
import m0006 from './migrations/0006_maintenance.sql';
import m0007 from './migrations/0007_stop_requests.sql';
import m0008 from './migrations/0008_alert_delivery.sql';
import m0009 from './migrations/0009_holding.sql';
import m0010 from './migrations/0010_slots.sql';

// Numbered migrations, applied in order. Append only: an applied file is never edited.
export const MYSQL_MIGRATIONS: readonly string[] = [m0001, m0002, m0003, m0004, m0005, m0006, m0007, m0008, m0009, m0010];
