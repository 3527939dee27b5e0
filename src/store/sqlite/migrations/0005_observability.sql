-- What status, check, metrics and prune need, at a cost that does not grow with the log.
-- As in PostgreSQL (0006): every job has a row in jobs, finished runs are counted per
-- status by a trigger (a counter must not drop when old rows are pruned).
INSERT INTO jobs (name) SELECT DISTINCT job FROM runs WHERE true ON CONFLICT (name) DO NOTHING;

CREATE TABLE run_counts (
  job    TEXT    NOT NULL,
  status TEXT    NOT NULL,
  n      INTEGER NOT NULL,
  PRIMARY KEY (job, status)
);
INSERT INTO run_counts (job, status, n)
SELECT job, status, count(*) FROM runs WHERE status <> 'running' GROUP BY job, status;

CREATE TRIGGER runs_counted AFTER INSERT ON runs BEGIN
  INSERT INTO jobs (name) VALUES (NEW.job) ON CONFLICT (name) DO NOTHING;
  INSERT INTO run_counts (job, status, n) SELECT NEW.job, NEW.status, 1 WHERE NEW.status <> 'running'
  ON CONFLICT (job, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER runs_recounted AFTER UPDATE OF status ON runs WHEN OLD.status IS NOT NEW.status BEGIN
  UPDATE run_counts SET n = n - 1 WHERE job = OLD.job AND status = OLD.status AND OLD.status <> 'running';
  INSERT INTO run_counts (job, status, n) SELECT NEW.job, NEW.status, 1 WHERE NEW.status <> 'running'
  ON CONFLICT (job, status) DO UPDATE SET n = n + 1;
END;

-- A job's latest runs with what status needs of them, read from the index alone; its last
-- success; runs since a time.
DROP INDEX runs_job_id;
CREATE INDEX runs_job_id ON runs (job, id DESC, status, duration_ms);
CREATE INDEX runs_job_succeeded ON runs (job, id DESC) WHERE status = 'succeeded';
CREATE INDEX runs_started_at ON runs (started_at);

CREATE TABLE housekeeping (
  task    TEXT PRIMARY KEY,
  last_at TEXT NOT NULL
);
