-- A local lock held by a process of a user who does not share the job (neither the
-- invoking user, root, nor the lock's group): who held it, and when a run was skipped for
-- it, so that `check` can warn rather than report a silent skip as a quiet night.
ALTER TABLE jobs ADD COLUMN blocked_by TEXT;
ALTER TABLE jobs ADD COLUMN blocked_at TEXT;
