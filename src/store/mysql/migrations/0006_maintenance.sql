-- Maintenance (issue 25, as PostgreSQL's 0020 and SQLite's 0011). A job's pause may end by
-- itself (`disable NAME --until`): it holds while disabled_until is NULL or later than the
-- admission's UTC_TIMESTAMP(6). The fleet's pause (`disable --all`) is one row, there from
-- the start, which every admission reads under a shared lock, so that a pause waits for the
-- admissions under way (drain then sees their runs). Every pause and resume is kept in
-- pause_events (job NULL: the fleet's). Each statement safe to run again after a crash:
-- the column there (1060), IF NOT EXISTS, INSERT IGNORE.
ALTER TABLE {{db}}.jobs ADD COLUMN disabled_until DATETIME(6) NULL;
CREATE TABLE IF NOT EXISTS {{db}}.fleet_pause (
  id        INT           NOT NULL PRIMARY KEY,
  paused    BOOLEAN       NOT NULL DEFAULT FALSE,
  reason    VARCHAR(1000) NULL,
  paused_at DATETIME(6)   NULL,
  paused_by VARCHAR(512)  NULL,
  until_at  DATETIME(6)   NULL,
  CONSTRAINT fleet_pause_one CHECK (id = 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT IGNORE INTO {{db}}.fleet_pause (id) VALUES (1);
CREATE TABLE IF NOT EXISTS {{db}}.pause_events (
  id       BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  job      VARCHAR(255)    NULL,
  action   VARCHAR(10)     NOT NULL,
  event_at DATETIME(6)     NOT NULL,
  event_by VARCHAR(512)    NOT NULL,
  reason   VARCHAR(1000)   NULL,
  until_at DATETIME(6)     NULL,
  KEY pause_events_job (job, id),
  CONSTRAINT pause_events_action CHECK (action IN ('pause', 'resume'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
