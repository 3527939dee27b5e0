-- The alert state as delivered, apart from the state wanted (issue 35, as SQLite's 0014):
-- alerted_at is the state the notifiers last DELIVERED (failing since; NULL: ok),
-- alert_failing and alert_run the job's latest final outcome, and alert_claim (until
-- alert_claimed_until) the invocation delivering a change now.
ALTER TABLE {{schema}}.jobs ADD COLUMN alert_failing boolean, ADD COLUMN alert_run bigint,
  ADD COLUMN alert_claim text, ADD COLUMN alert_claimed_until timestamptz;
