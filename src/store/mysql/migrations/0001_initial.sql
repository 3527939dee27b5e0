-- The run log in MySQL 8 / MariaDB 10.6+, in a database of its own ({{db}}, the quoted
-- name). The same tables and columns as PostgreSQL's schema after its migration 0016, made
-- in one file: every statement is CREATE TABLE IF NOT EXISTS, so a migration stopped half
-- way (MySQL's DDL commits one statement at a time) is simply run again.
-- Times are DATETIME(6) in UTC: cronguard writes UTC, and the defaults are UTC_TIMESTAMP(6),
-- so a web application's INSERT gets UTC whatever its session's time_zone.
-- No triggers, procedures or functions: creating them needs SUPER (or
-- log_bin_trust_function_creators) on a server with binary logging, MySQL 8's default, and a
-- least-privilege role must be able to migrate. What PostgreSQL's triggers keep (the jobs row,
-- run_counts) is kept by the store's statements.
-- utf8mb4_bin: job and host names compare as bytes, as PostgreSQL's text does.

-- One row per attempt (the contract's columns). `trigger` and `signal` are reserved words.
CREATE TABLE IF NOT EXISTS {{db}}.runs (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  job              VARCHAR(255) NOT NULL,
  status           VARCHAR(16)  NOT NULL,
  `trigger`        VARCHAR(16)  NOT NULL,
  attempt          INT          NOT NULL DEFAULT 1,
  host             VARCHAR(255) NOT NULL,
  pid              INT          NOT NULL,
  child_pid        INT          NULL,
  username         VARCHAR(255) NULL,
  command          MEDIUMTEXT   NOT NULL,
  started_at       DATETIME(6)  NOT NULL,
  finished_at      DATETIME(6)  NULL,
  duration_ms      BIGINT       NULL,
  exit_code        INT          NULL,
  `signal`         VARCHAR(32)  NULL,
  output           LONGTEXT     NULL,
  output_truncated BOOLEAN      NOT NULL DEFAULT FALSE,
  overlaps         INT          NOT NULL DEFAULT 0,
  request_id       BIGINT UNSIGNED NULL,
  error            TEXT         NULL,
  -- The scheduled minute it belongs to (one run per tick across a fleet) and the lock it held.
  tick             DATETIME(6)  NULL,
  lock_backend     VARCHAR(32)  NULL,
  lock_key         VARCHAR(255) NULL,
  -- The client's key for the run (a spooled record delivered twice stays one row), when the
  -- invocation began, the wrapper's boot id and start time.
  run_key          VARCHAR(255) NULL,
  invoked_at       DATETIME(6)  NULL,
  wrapper_start    VARCHAR(255) NULL,
  CONSTRAINT runs_status CHECK (status IN ('running', 'succeeded', 'failed', 'timed_out', 'killed', 'lock_lost', 'abandoned')),
  CONSTRAINT runs_trigger CHECK (`trigger` IN ('cron', 'manual', 'request', 'retry')),
  UNIQUE KEY runs_run_key (run_key),
  -- A job's latest runs (with what status needs of them), its running or last successful one.
  KEY runs_job_id (job, id, status, duration_ms),
  KEY runs_job_status (job, status, id),
  -- The run that had a tick (the fleet rule), runs since a time (history, prune), and what
  -- runs now under a lock (status's lock_held_by).
  KEY runs_job_tick (job, tick),
  KEY runs_started_at (started_at),
  KEY runs_lock (status, lock_backend, lock_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Per-job state: the pause, skips parked until the holder's row can take them
-- (pending_overlaps), the fleet's latest claimed tick, the job as its last admitted run saw
-- it, and a local lock held by a stranger. Every admission locks its job's row first: that
-- is what serialises the interval and the tick across hosts that hold no common lock.
CREATE TABLE IF NOT EXISTS {{db}}.jobs (
  name             VARCHAR(255) NOT NULL PRIMARY KEY,
  disabled         BOOLEAN      NOT NULL DEFAULT FALSE,
  disabled_reason  TEXT         NULL,
  disabled_at      DATETIME(6)  NULL,
  disabled_by      VARCHAR(255) NULL,
  pending_overlaps INT          NOT NULL DEFAULT 0,
  tick             DATETIME(6)  NULL,
  tick_host        VARCHAR(255) NULL,
  command          MEDIUMTEXT   NULL,
  host             VARCHAR(255) NULL,
  min_interval_ms  BIGINT       NULL,
  last_seen_at     DATETIME(6)  NULL,
  blocked_by       VARCHAR(255) NULL,
  blocked_at       DATETIME(6)  NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- "Run now" requests. What a web application sends (every other column has a default):
--   INSERT INTO cronguard.requests (job, args, requested_by) VALUES ('backup', JSON_ARRAY('--full'), 'php');
-- args must be a JSON array of strings without NUL characters (what a command line carries):
-- the CHECK reads its text (MySQL's JSON type and MariaDB's JSON_VALID check already proved
-- it is valid JSON), so any other shape is refused by the table, whoever inserts it.
CREATE TABLE IF NOT EXISTS {{db}}.requests (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  job          VARCHAR(100) NOT NULL,
  args         JSON         NOT NULL DEFAULT (JSON_ARRAY()),
  requested_by VARCHAR(255) NULL,
  requested_at DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  not_before   DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
  status       VARCHAR(16)  NOT NULL DEFAULT 'pending',
  attempts     INT          NOT NULL DEFAULT 0,
  claimed_at   DATETIME(6)  NULL,
  run_id       BIGINT UNSIGNED NULL,
  finished_at  DATETIME(6)  NULL,
  exit_code    INT          NULL,
  error        TEXT         NULL,
  CONSTRAINT requests_job CHECK (job REGEXP '^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$' AND job NOT REGEXP '^[0-9]+$'),
  CONSTRAINT requests_status CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
  CONSTRAINT requests_args_strings CHECK (CONVERT(args USING utf8mb4) REGEXP
    '^[[:space:]]*\\[[[:space:]]*("(?:[^"\\\\]|\\\\(?!u0000).)*+"[[:space:]]*(,[[:space:]]*"(?:[^"\\\\]|\\\\(?!u0000).)*+"[[:space:]]*)*+)?\\][[:space:]]*$'),
  -- Loops poll this (job, pending, due): an index range of the job's pending requests.
  KEY requests_due (job, status, not_before),
  KEY requests_run (run_id, status),
  KEY requests_job_id (job, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Finished runs ever recorded, by status: a counter that pruning does not lower.
CREATE TABLE IF NOT EXISTS {{db}}.run_counts (
  job    VARCHAR(255) NOT NULL,
  status VARCHAR(16)  NOT NULL,
  n      BIGINT       NOT NULL,
  PRIMARY KEY (job, status)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- When a periodic task (the automatic prune) last ran, for the whole fleet.
CREATE TABLE IF NOT EXISTS {{db}}.housekeeping (
  task    VARCHAR(64) NOT NULL PRIMARY KEY,
  last_at DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
