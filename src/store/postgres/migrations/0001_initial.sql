-- The run log: one row per attempt. {{schema}} is replaced by the quoted schema name.
CREATE TABLE {{schema}}.runs (
  id               bigserial   PRIMARY KEY,
  job              text        NOT NULL,
  status           text        NOT NULL CHECK (status IN
                     ('running', 'succeeded', 'failed', 'timed_out', 'killed', 'lock_lost', 'abandoned')),
  trigger          text        NOT NULL CHECK (trigger IN ('cron', 'manual', 'request', 'retry')),
  attempt          integer     NOT NULL DEFAULT 1,
  host             text        NOT NULL,
  pid              integer     NOT NULL,
  child_pid        integer,
  username         text,
  command          text        NOT NULL,
  started_at       timestamptz NOT NULL,
  finished_at      timestamptz,
  duration_ms      bigint,
  exit_code        integer,
  signal           text,
  output           text,
  output_truncated boolean     NOT NULL DEFAULT false,
  "overlaps"       integer     NOT NULL DEFAULT 0,  -- quoted: OVERLAPS is an SQL keyword
  request_id       bigint,
  error            text
);

-- "latest runs of a job" and "running now".
CREATE INDEX runs_job_id ON {{schema}}.runs (job, id DESC);
CREATE INDEX runs_running ON {{schema}}.runs (job, host) WHERE status = 'running';

-- Per-job state. pending_overlaps counts skips that could not yet see the holder's row;
-- the holder adds them to its run when it finishes.
CREATE TABLE {{schema}}.jobs (
  name             text        PRIMARY KEY,
  disabled         boolean     NOT NULL DEFAULT false,
  disabled_reason  text,
  disabled_at      timestamptz,
  pending_overlaps integer     NOT NULL DEFAULT 0
);
