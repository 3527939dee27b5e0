-- A loop (--for) that holds its job's lock between runs, and until when (issue 36, item 9; as
-- SQLite's 0015): set when a loop starts holding, cleared when it lets the lock go.
ALTER TABLE {{schema}}.jobs ADD COLUMN holding_host text, ADD COLUMN holding_pid integer, ADD COLUMN holding_until timestamptz,
  ADD COLUMN holding_lock text, ADD COLUMN holding_key text;
