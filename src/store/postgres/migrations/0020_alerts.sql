-- When the open incident's failure notification went out (--notify, --notify-url); NULL
-- while the job is not failing. Moved by compare-and-set (markAlert), so one host of a
-- fleet notifies of each change.
ALTER TABLE {{schema}}.jobs ADD COLUMN alerted_at timestamptz;
