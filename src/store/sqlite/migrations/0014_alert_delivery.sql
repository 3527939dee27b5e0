-- The alert state as delivered, apart from the state wanted (issue 35): alerted_at is now the
-- state the notifiers last DELIVERED (failing since; NULL: ok), alert_failing and alert_run
-- the job's latest final outcome, and alert_claim (until alert_claimed_until) the invocation
-- delivering a change now. Only one delivers at a time, and it says what the latest outcome
-- wants once it is done, so the last alert delivered is the job's latest state, and a
-- recovery goes out only after its failure did.
ALTER TABLE jobs ADD COLUMN alert_failing INTEGER;
ALTER TABLE jobs ADD COLUMN alert_run INTEGER;
ALTER TABLE jobs ADD COLUMN alert_claim TEXT;
ALTER TABLE jobs ADD COLUMN alert_claimed_until TEXT;
