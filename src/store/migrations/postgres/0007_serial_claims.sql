-- Hosts that each hold only a local lock decide the minimum interval and the fleet's tick
-- one at a time, on the job's row, and each by statements that start after that row is
-- theirs. Without it six hosts with local locks and the shared log, started in the same
-- minute, could all run: each waited inside its tick claim for the first host's claim to
-- commit, then judged it by a snapshot (taken when that statement started) without the
-- first host's run. admit() of 0005 is kept as it is, behind a lock on the job's row: each
-- of its statements starts after the lock is held, and so sees every claim made before.
ALTER FUNCTION {{schema}}.admit(jsonb) RENAME TO admit_unserialised;

CREATE FUNCTION {{schema}}.admit(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF p->>'min_interval_ms' IS NOT NULL OR ((p->>'fleet')::boolean AND p->>'tick' IS NOT NULL) THEN
    INSERT INTO {{schema}}.jobs (name) VALUES (p->>'job') ON CONFLICT (name) DO NOTHING;
    PERFORM 1 FROM {{schema}}.jobs WHERE name = p->>'job' FOR UPDATE;
  END IF;
  RETURN {{schema}}.admit_unserialised(p);
END $$;
