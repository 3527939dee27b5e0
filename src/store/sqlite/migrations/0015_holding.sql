-- A loop (--for) that holds its job's lock between runs, and until when (issue 36, item 9):
-- the lock is busy though no run is `running`, which `status`, `locks` and the web page say.
-- Set when a loop starts holding, cleared when it lets the lock go; a wrapper that vanished
-- leaves it, read as over once holding_until has passed.
ALTER TABLE jobs ADD COLUMN holding_host TEXT;
ALTER TABLE jobs ADD COLUMN holding_pid INTEGER;
ALTER TABLE jobs ADD COLUMN holding_until TEXT;
ALTER TABLE jobs ADD COLUMN holding_lock TEXT;
ALTER TABLE jobs ADD COLUMN holding_key TEXT;
