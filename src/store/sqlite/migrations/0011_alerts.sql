-- When the open incident's failure notification went out (--notify, --notify-url); NULL
-- while the job is not failing. Moved by compare-and-set (markAlert), so one invocation
-- notifies of each change, however many hosts or overlapping runs end at once.
ALTER TABLE jobs ADD COLUMN alerted_at TEXT;
