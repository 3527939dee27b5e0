-- Bounds that hold through any pooler (issue 18). They were startup options of every session
-- (-c lock_timeout=5s -c statement_timeout=20s), which PgBouncer refuses ("unsupported
-- startup parameter: options") or, told to ignore them, silently drops; a session SET would
-- leak to other clients of a transaction pool and be missing on the next server connection.
-- A function's SET clause holds while the function runs, on whichever server connection
-- runs it, and nowhere else. lock_timeout: a table or row that another session holds locked
-- (maintenance, a stuck transaction) cancels the write after 5 s, so the server never
-- commits it after cronguard has given up on it and spooled the run. The statements inside
-- a function are parsed after the SET applies, so a wait for a table lock is bounded too.
-- statement_timeout is not set here: set on entering a function it does not re-arm the timer
-- of the statement already running (measured: a function with statement_timeout = 1s that
-- slept 3 s returned after 3 s, uncancelled).
ALTER FUNCTION {{schema}}.admit(jsonb) SET lock_timeout = '5s';
ALTER FUNCTION {{schema}}.settle_claims(jsonb) SET lock_timeout = '5s';
ALTER FUNCTION {{schema}}.settle_claims_of(bigint[]) SET lock_timeout = '5s';

-- A run's outcome (the statement src/store/postgres-sql.ts had as `finish`), as a function
-- so that it is bounded as above. Skips that could not see this run's row yet were parked on
-- the job; they are folded in. On the last attempt (final) its requests end with it, and
-- waiters (request --wait) hear. Returns whether the run's row was there to update.
CREATE FUNCTION {{schema}}.finish(p jsonb) RETURNS boolean LANGUAGE sql SET lock_timeout = '5s' AS $$
  WITH claimed AS (UPDATE {{schema}}.jobs j SET pending_overlaps = 0 FROM {{schema}}.jobs old
                   WHERE j.name = (SELECT job FROM {{schema}}.runs WHERE id = (p->>'id')::bigint) AND old.name = j.name
                     AND old.pending_overlaps > 0
                   RETURNING old.pending_overlaps AS n),
       done AS (UPDATE {{schema}}.runs SET status = p->>'status', finished_at = (p->>'finished_at')::timestamptz,
                       duration_ms = (p->>'duration_ms')::bigint, exit_code = (p->>'exit_code')::integer, signal = p->>'signal',
                       output = p->>'output', output_truncated = (p->>'output_truncated')::boolean, error = p->>'error',
                       "overlaps" = "overlaps" + coalesce((SELECT n FROM claimed), 0)
                WHERE id = (p->>'id')::bigint RETURNING id),
       ended AS (UPDATE {{schema}}.requests SET status = p->>'request_status', finished_at = (p->>'finished_at')::timestamptz,
                        exit_code = (p->>'exit_code')::integer
                 WHERE run_id = (p->>'id')::bigint AND status = 'running' AND (p->>'final')::boolean RETURNING id)
  SELECT EXISTS (SELECT FROM done)
  FROM (SELECT count(pg_notify('cronguard_requests_done', (p->>'schema') || ':' || id)) FROM ended) AS heard;
$$;

-- Whether this server backend holds advisory lock `key` (as lock/postgres.ts's advisoryHeld):
-- pg_locks shows a bigint key as classid (its high 32 bits) and objid (its low 32 bits).
CREATE FUNCTION {{schema}}.holds(key bigint) RETURNS boolean LANGUAGE sql AS $$
  SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 1
                   AND classid = ((key >> 32) & 4294967295)::oid AND objid = (key & 4294967295)::oid);
$$;

-- The run path's admission in one call (the statement's `admit` in postgres-sql.ts):
-- settle_claims(), then admit(), under three guards a pooler needs.
-- 1. A server backend that already holds the job's key admits nothing and settles nothing
--    (`reentered`): a session lock is re-entrant, and through a transaction pool that
--    backend serves another client, whose lock this would take for ours.
-- 2. A session advisory lock taken by a statement that then fails is not rolled back with
--    it: the one settle_claims() or admit() took before failing (a lock timeout, a missing
--    privilege) is released here, so the caller's retry of the lock alone finds it free
--    (the backend did not hold it before: guard 1).
-- 3. It says which backend ran it and whether that backend holds the lock now.
CREATE FUNCTION {{schema}}.admit(p jsonb, guarded boolean) RETURNS jsonb LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  lock_key bigint := (p->>'key')::bigint;
  settled  jsonb;
  result   jsonb;
BEGIN
  IF lock_key IS NOT NULL AND {{schema}}.holds(lock_key) THEN
    RETURN jsonb_build_object('r', jsonb_build_object('admitted', false, 'reason', 'reentered'), 'backend', pg_backend_pid());
  END IF;
  BEGIN
    settled := {{schema}}.settle_claims(p);
    result := {{schema}}.admit(settled);
  EXCEPTION WHEN OTHERS THEN
    IF lock_key IS NOT NULL AND {{schema}}.holds(lock_key) THEN PERFORM pg_advisory_unlock(lock_key); END IF;
    RAISE;
  END;
  RETURN jsonb_build_object('r', result, 'orphaned', settled->'orphaned', 'backend', pg_backend_pid(),
                            'holding', lock_key IS NOT NULL AND {{schema}}.holds(lock_key));
END $$;
