-- When a run of --scheduled last said that its job has no schedule it can read (as
-- PostgreSQL's 0018): once a day, not at every invocation. One statement (see 0003).
ALTER TABLE {{db}}.jobs ADD COLUMN unscheduled_said_at DATETIME(6) NULL;
