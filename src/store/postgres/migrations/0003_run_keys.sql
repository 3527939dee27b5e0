-- run_key: a key the client makes up before it first writes a run, under a unique
-- constraint, so that a start whose reply was lost, or a spooled record delivered twice, stays
-- one row. invoked_at: when the invocation began (started_at is when it got the lock).
-- wrapper_start: the wrapper's boot id and start time, so that a reused pid is not taken
-- for the wrapper that vanished.
ALTER TABLE {{schema}}.runs
  ADD COLUMN run_key       text,
  ADD COLUMN invoked_at    timestamptz,
  ADD COLUMN wrapper_start text;

CREATE UNIQUE INDEX runs_run_key ON {{schema}}.runs (run_key);
