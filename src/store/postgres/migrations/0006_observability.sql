-- What status, check, metrics and prune need, at a cost that does not grow with the log.

-- Every job that ever ran has a row in jobs (status lists jobs from there, not by scanning
-- runs), and finished runs are counted per status (Prometheus' runs_total: a counter must
-- not drop when old rows are pruned). A trigger keeps both, whichever path wrote the run:
-- admission, a spooled record, a retry, an abandonment, or SQL of the operator's own.
INSERT INTO {{schema}}.jobs (name) SELECT DISTINCT job FROM {{schema}}.runs ON CONFLICT (name) DO NOTHING;

CREATE TABLE {{schema}}.run_counts (
  job    text   NOT NULL,
  status text   NOT NULL,
  n      bigint NOT NULL,
  PRIMARY KEY (job, status)
);
INSERT INTO {{schema}}.run_counts (job, status, n)
SELECT job, status, count(*) FROM {{schema}}.runs WHERE status <> 'running' GROUP BY job, status;

CREATE FUNCTION {{schema}}.count_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO {{schema}}.jobs (name) VALUES (NEW.job) ON CONFLICT (name) DO NOTHING;
  ELSIF OLD.status <> 'running' THEN
    -- A spooled outcome overwriting a row another host had marked abandoned.
    UPDATE {{schema}}.run_counts SET n = n - 1 WHERE job = OLD.job AND status = OLD.status;
  END IF;
  IF NEW.status <> 'running' THEN
    INSERT INTO {{schema}}.run_counts AS c (job, status, n) VALUES (NEW.job, NEW.status, 1)
    ON CONFLICT (job, status) DO UPDATE SET n = c.n + 1;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER runs_counted AFTER INSERT ON {{schema}}.runs
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.count_run();
CREATE TRIGGER runs_recounted AFTER UPDATE OF status ON {{schema}}.runs
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION {{schema}}.count_run();

-- A job's latest runs with what status needs of them, read from the index alone (its
-- statistics over 50 runs for each of a thousand jobs); a job's last success (status,
-- check); runs since a time (history --since, prune).
DROP INDEX {{schema}}.runs_job_id;
CREATE INDEX runs_job_id ON {{schema}}.runs (job, id DESC) INCLUDE (status, duration_ms);
CREATE INDEX runs_job_succeeded ON {{schema}}.runs (job, id DESC) WHERE status = 'succeeded';
CREATE INDEX runs_started_at ON {{schema}}.runs (started_at);

-- When the automatic prune last ran, so that it runs about once a day for the whole fleet.
CREATE TABLE {{schema}}.housekeeping (
  task    text        PRIMARY KEY,
  last_at timestamptz NOT NULL
);
