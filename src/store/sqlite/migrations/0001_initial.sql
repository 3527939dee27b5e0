-- The run log: one row per attempt. Times are ISO-8601 UTC text.
CREATE TABLE runs (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  job              TEXT    NOT NULL,
  status           TEXT    NOT NULL CHECK (status IN
                     ('running', 'succeeded', 'failed', 'timed_out', 'killed', 'lock_lost', 'abandoned')),
  trigger          TEXT    NOT NULL CHECK (trigger IN ('cron', 'manual', 'request', 'retry')),
  attempt          INTEGER NOT NULL DEFAULT 1,
  host             TEXT    NOT NULL,
  pid              INTEGER NOT NULL,
  child_pid        INTEGER,
  username         TEXT,
  command          TEXT    NOT NULL,
  started_at       TEXT    NOT NULL,
  finished_at      TEXT,
  duration_ms      INTEGER,
  exit_code        INTEGER,
  signal           TEXT,
  output           TEXT,
  output_truncated INTEGER NOT NULL DEFAULT 0,
  overlaps         INTEGER NOT NULL DEFAULT 0,
  request_id       INTEGER,
  error            TEXT
);

-- "latest runs of a job" and "running now".
CREATE INDEX runs_job_id ON runs (job, id DESC);
CREATE INDEX runs_running ON runs (job, host) WHERE status = 'running';

-- One row per job that needs state beyond its runs. pending_overlaps counts skips that
-- happened before the lock holder had inserted its row; the holder claims them.
CREATE TABLE jobs (
  name             TEXT PRIMARY KEY,
  disabled         INTEGER NOT NULL DEFAULT 0,
  disabled_reason  TEXT,
  disabled_at      TEXT,
  pending_overlaps INTEGER NOT NULL DEFAULT 0
);
