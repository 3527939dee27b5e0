-- --max-running N (issue 39, as the embedded log's 0016): the slot of the job's lock a run
-- held (0 to N-1), and the N it was run with, which every copy of a job must agree on. Runs
-- from before held slot 0 of 1, read as such where these are NULL. One statement (see 0003).
ALTER TABLE {{db}}.runs ADD COLUMN slot INT NULL, ADD COLUMN max_running INT NULL;

-- The fleet's rule for such a job is at most N starts per tick: N ticks to claim, each at
-- most once a minute. The first is the job's own (jobs.tick, tick_host, as before slots);
-- the others are rows here, made when first claimed, written only under the job's row lock
-- (which every admission takes first), so they need no lock of their own. Safe to run
-- again, as 0001.
CREATE TABLE IF NOT EXISTS {{db}}.slot_ticks (
  job       VARCHAR(255) NOT NULL,
  slot      INT          NOT NULL,
  tick      DATETIME(6)  NOT NULL,
  tick_host VARCHAR(255) NOT NULL,
  PRIMARY KEY (job, slot)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
