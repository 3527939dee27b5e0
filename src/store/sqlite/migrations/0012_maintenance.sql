-- Maintenance (issue 25). A job's pause may end by itself (`disable NAME --until`): it holds
-- while disabled_until is NULL or later than the admission's clock. The fleet's pause
-- (`disable --all`) is one row, there from the start: paused or not, until when, why, by
-- whom; every admission reads it. Every pause and resume is kept in pause_events, a job's
-- with its name, the fleet's with job NULL. Times are ISO-8601 UTC text, as everywhere.
ALTER TABLE jobs ADD COLUMN disabled_until TEXT;
CREATE TABLE fleet_pause (
  id        INTEGER PRIMARY KEY CHECK (id = 1),
  paused    INTEGER NOT NULL DEFAULT 0,
  reason    TEXT,
  paused_at TEXT,
  paused_by TEXT,
  until_at  TEXT
);
INSERT INTO fleet_pause (id) VALUES (1);
CREATE TABLE pause_events (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  job      TEXT,
  action   TEXT NOT NULL CHECK (action IN ('pause', 'resume')),
  event_at TEXT NOT NULL,
  event_by TEXT NOT NULL,
  reason   TEXT,
  until_at TEXT
);
CREATE INDEX pause_events_job ON pause_events (job, id);
