-- The scheduled minute a run belongs to (one run per tick across a fleet), and the lock it
-- held (for `cronguard locks`). jobs.tick/tick_host: which host claimed the job's latest
-- tick; claiming it is an upsert on this row, so two hosts can never both claim one tick.
ALTER TABLE {{schema}}.runs
  ADD COLUMN tick         timestamptz,
  ADD COLUMN lock_backend text,
  ADD COLUMN lock_key     text;

ALTER TABLE {{schema}}.jobs
  ADD COLUMN tick      timestamptz,
  ADD COLUMN tick_host text;
