-- A request to stop a running run (issue 25, as PostgreSQL's 0020): the signal to send its
-- command's process group and who asked, read by the run's wrapper on whichever host it
-- runs (a primary-key probe every few seconds while its command runs). One row per run,
-- the latest request winning; it goes with its run. One statement, run again safely.
CREATE TABLE IF NOT EXISTS {{db}}.stop_requests (
  run_id       BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  `signal`     VARCHAR(16)     NOT NULL,
  requested_by VARCHAR(300)    NOT NULL,
  requested_at DATETIME(6)     NOT NULL,
  CONSTRAINT stop_requests_run FOREIGN KEY (run_id) REFERENCES {{db}}.runs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
