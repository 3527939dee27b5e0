-- --max-running N (issue 39): the slot of the job's lock a run held (0 to N-1), and the N it
-- was run with, which every copy of a job must agree on. Runs from before hold slot 0 of 1,
-- read as such where these are NULL.
ALTER TABLE runs ADD COLUMN slot INTEGER;
ALTER TABLE runs ADD COLUMN max_running INTEGER;
