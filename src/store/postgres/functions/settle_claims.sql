-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.settle_claims(p jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE SET lock_timeout = '5s' AS $$
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
