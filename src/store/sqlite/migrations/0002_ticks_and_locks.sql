-- The scheduled minute a run belongs to, and the lock it held (for `cronguard locks`).
ALTER TABLE runs ADD COLUMN tick TEXT;
ALTER TABLE runs ADD COLUMN lock_backend TEXT;
ALTER TABLE runs ADD COLUMN lock_key TEXT;
