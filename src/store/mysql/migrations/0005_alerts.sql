-- When the open incident's failure notification went out (--notify, --notify-url; as
-- PostgreSQL's 0020); NULL while the job is not failing. One statement (see 0003).
ALTER TABLE {{db}}.jobs ADD COLUMN alerted_at DATETIME(6) NULL;
