-- A loop (--for) that holds its job's lock between runs, and until when (issue 36, item 9; as
-- PostgreSQL's 0026). One statement (see 0003).
ALTER TABLE {{db}}.jobs ADD COLUMN holding_host VARCHAR(255) NULL, ADD COLUMN holding_pid INT NULL,
  ADD COLUMN holding_until DATETIME(6) NULL, ADD COLUMN holding_lock VARCHAR(32) NULL, ADD COLUMN holding_key VARCHAR(1024) NULL;
