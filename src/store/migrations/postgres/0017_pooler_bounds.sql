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
