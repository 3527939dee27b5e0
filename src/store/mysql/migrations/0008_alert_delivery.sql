-- The alert state as delivered, apart from the state wanted (issue 35, as PostgreSQL's 0024):
-- alerted_at is the state the notifiers last DELIVERED, alert_failing and alert_run the job's
-- latest final outcome, alert_claim (until alert_claimed_until) the invocation delivering a
-- change now. One statement (see 0003).
ALTER TABLE {{db}}.jobs ADD COLUMN alert_failing TINYINT NULL, ADD COLUMN alert_run BIGINT UNSIGNED NULL,
  ADD COLUMN alert_claim VARCHAR(64) NULL, ADD COLUMN alert_claimed_until DATETIME(6) NULL;
