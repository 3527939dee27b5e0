-- run_key: a key the client makes up before it first writes a run (unique: one row per
-- run, however often its record is written). invoked_at: when the invocation began
-- (started_at is when it got the lock). wrapper_start: the wrapper's boot id and start time.
ALTER TABLE runs ADD COLUMN run_key TEXT;
ALTER TABLE runs ADD COLUMN invoked_at TEXT;
ALTER TABLE runs ADD COLUMN wrapper_start TEXT;
CREATE UNIQUE INDEX runs_run_key ON runs (run_key);
