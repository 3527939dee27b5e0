-- A request to stop a running run (issue 25, `cronguard stop`, `--replace`): the signal to
-- send its command's process group and who asked, read by the run's wrapper. One row per
-- run, the latest request winning; it goes with its run (prune).
CREATE TABLE stop_requests (
  run_id       INTEGER PRIMARY KEY,
  signal       TEXT NOT NULL,
  requested_by TEXT NOT NULL,
  requested_at TEXT NOT NULL
);
CREATE TRIGGER stop_requests_of_pruned AFTER DELETE ON runs BEGIN
  DELETE FROM stop_requests WHERE run_id = old.id;
END;
