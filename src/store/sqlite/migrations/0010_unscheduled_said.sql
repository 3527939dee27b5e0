-- When a run of --scheduled last said that its job has no schedule it can read: it says so
-- once a day (under cron, a mail a day), not at every invocation.
ALTER TABLE jobs ADD COLUMN unscheduled_said_at TEXT;
