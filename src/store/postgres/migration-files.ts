import m0001 from './migrations/0001_initial.sql';
import m0002 from './migrations/0002_ticks_and_locks.sql';
import m0003 from './migrations/0003_run_keys.sql';
import m0004 from './migrations/0004_requests.sql';
import m0005 from './migrations/0005_admission.sql';
import m0006 from './migrations/0006_observability.sql';
import m0007 from './migrations/0007_serial_claims.sql';
import m0008 from './migrations/0008_blocked.sql';
import m0009 from './migrations/0009_request_errors.sql';
import m0010 from './migrations/0010_request_args.sql';
import m0011 from './migrations/0011_settled_claims.sql';
import m0012 from './migrations/0012_admission.sql';
import m0013 from './migrations/0013_pooler_bounds.sql';
import m0014 from './migrations/0014_leases.sql';
import m0015 from './migrations/0015_long_leases.sql';
import m0016 from './migrations/0016_parked_skips.sql';
import m0017 from './migrations/0017_schedules.sql';
import m0018 from './migrations/0018_cron.sql';
import m0019 from './migrations/0019_scheduled_admission.sql';
import m0020 from './migrations/0020_alerts.sql';
import m0021 from './migrations/0021_maintenance.sql';
import m0022 from './migrations/0022_stop_requests.sql';
import m0023 from './migrations/0023_lock_time_start.sql';
import m0024 from './migrations/0024_alert_delivery.sql';
import m0025 from './migrations/0025_spacing.sql';
import m0026 from './migrations/0026_holding.sql';
import m0027 from './migrations/0027_admit_parts.sql';
import m0028 from './migrations/0028_slots.sql';
import m0029 from './migrations/0029_plain_admission.sql';

// Numbered migrations, applied in order. Append only: an applied file is never edited. The
// functions they leave, as they run now, are in functions/ (one file each).
export const POSTGRES_MIGRATIONS: readonly string[] = [m0001, m0002, m0003, m0004, m0005, m0006, m0007, m0008, m0009, m0010, m0011, m0012, m0013, m0014, m0015, m0016, m0017, m0018, m0019, m0020, m0021, m0022, m0023, m0024, m0025, m0026, m0027, m0028, m0029];
