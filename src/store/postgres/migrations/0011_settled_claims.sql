-- Requests whose run ended without its last attempt stayed `running` for ever: a wrapper
-- killed while it waited to retry had finished its attempt's row and started no other, so
-- no `running` row was left for admit() to abandon. The admission statement is now
-- admit(settle_claims(p)): under the job's lock, the claims of runs that lock proves ended
-- are settled first, so that admit() may claim again what goes back to `pending`.

-- The claims still `running` of these finished runs, whose wrappers are gone: a request the
-- run never started its command for (no child pid) goes back to `pending`; one it did ends
-- `failed`, with the last attempt's exit code and why (its command ran for it, and another
-- run would serve it twice). The same as SQLite's claimsUnstarted and claimsCut.
CREATE FUNCTION {{schema}}.settle_claims_of(ids bigint[]) RETURNS void LANGUAGE sql AS $$
  UPDATE {{schema}}.requests q SET status = 'pending', run_id = NULL, claimed_at = NULL, attempts = greatest(q.attempts - 1, 0)
  FROM {{schema}}.runs r
  WHERE q.run_id = ANY(ids) AND q.status = 'running' AND r.id = q.run_id AND r.status <> 'running' AND r.child_pid IS NULL;
  UPDATE {{schema}}.requests q SET status = 'failed', finished_at = now(), exit_code = r.exit_code,
         error = 'run ' || r.id || ' ended without its last attempt: its wrapper vanished before it could retry or record the end'
  FROM {{schema}}.runs r
  WHERE q.run_id = ANY(ids) AND q.status = 'running' AND r.id = q.run_id AND r.status <> 'running';
$$;

-- Settles, before admit(p) decides, the claims of the job's finished runs whose lock this
-- invocation holds: the postgres lock (p's key; taken here for as long as it settles, and
-- taken again by admit() for itself) proves its runs on any host ended, a local lock (held
-- by the caller) those of this host, as admit() judges `running` rows. Returns p, with this
-- host's other such runs (`orphaned`), whose wrappers only this host can check.
CREATE FUNCTION {{schema}}.settle_claims(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  job_name  text    := p->>'job';
  host_name text    := p->>'host';
  took_lock boolean := false;
  proven    bigint[];
  unproven  jsonb;
BEGIN
  IF p ? 'key' THEN
    IF NOT pg_try_advisory_lock((p->>'key')::bigint) THEN RETURN p; END IF;
    took_lock := true;
  END IF;
  WITH ended AS (
    SELECT r.id, r.pid, r.wrapper_start, r.lock_backend, r.lock_key, r.host,
           coalesce((r.lock_backend IS NULL AND took_lock)
                    OR (r.lock_backend = p->>'lock_backend' AND r.lock_key = p->>'lock_key' AND (took_lock OR r.host = host_name)),
                    false) AS by_lock
    FROM {{schema}}.runs r
    WHERE r.id IN (SELECT q.run_id FROM {{schema}}.requests q WHERE q.job = job_name AND q.status = 'running')
      AND r.status <> 'running'
      -- Not this wrapper's own runs (a loop's).
      AND NOT (r.host = host_name AND r.pid = (p->>'pid')::integer AND r.wrapper_start IS NOT DISTINCT FROM p->>'wrapper_start'))
  SELECT array_agg(e.id) FILTER (WHERE e.by_lock),
         coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'pid', e.pid, 'wrapper_start', e.wrapper_start,
                                               'lock_backend', e.lock_backend, 'lock_key', e.lock_key))
                  FILTER (WHERE NOT e.by_lock AND e.host = host_name), '[]')
  INTO proven, unproven FROM ended e;
  IF proven IS NOT NULL THEN PERFORM {{schema}}.settle_claims_of(proven); END IF;
  IF took_lock THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
  RETURN p || jsonb_build_object('orphaned', unproven);
END $$;
