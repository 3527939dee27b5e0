-- "Run now" requests and pausing. args is a JSON array of strings. A web application inserts
-- a request with: INSERT INTO requests (job) VALUES ('backup') RETURNING id;
CREATE TABLE requests (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  job          TEXT    NOT NULL CHECK (job GLOB '[A-Za-z0-9_]*' AND NOT job GLOB '*[^A-Za-z0-9_.:@+-]*'
                                       AND job GLOB '*[^0-9]*' AND length(job) <= 100),
  args         TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(args) AND json_type(args) = 'array'),
  requested_by TEXT,
  requested_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  not_before   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  status       TEXT    NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
  attempts     INTEGER NOT NULL DEFAULT 0,
  claimed_at   TEXT,
  run_id       INTEGER,
  finished_at  TEXT,
  exit_code    INTEGER
);
CREATE INDEX requests_due ON requests (job, id) WHERE status = 'pending';
CREATE INDEX requests_run ON requests (run_id) WHERE status = 'running';
CREATE INDEX requests_job_id ON requests (job, id DESC);

-- Who paused a job; and the job as its last admitted run saw it, for status: its command
-- and host, its minimum interval (for the next due time), when last seen.
ALTER TABLE jobs ADD COLUMN disabled_by TEXT;
ALTER TABLE jobs ADD COLUMN command TEXT;
ALTER TABLE jobs ADD COLUMN host TEXT;
ALTER TABLE jobs ADD COLUMN min_interval_ms INTEGER;
ALTER TABLE jobs ADD COLUMN last_seen_at TEXT;
