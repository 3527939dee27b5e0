-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.slot_disagreement(p jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE SET lock_timeout = '5s' AS $$
DECLARE
  job_name   text    := p->>'job';
  host_name  text    := p->>'host';
  slot_count integer := coalesce((p->>'max_running')::integer, 1);
  found      jsonb;
BEGIN
  -- Advisory keys held in this database (bigint keys: objsubid 1, the key split into classid
  -- and objid as holds() reads it), as the text a run's lock_key records.
  WITH held AS (
    SELECT ((l.classid::bigint << 32) | l.objid::bigint)::text AS lock_key FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())),
  stale AS (
    SELECT r.id FROM {{schema}}.runs r
    WHERE r.job = job_name AND r.status = 'running' AND coalesce(r.max_running, 1) <> slot_count
      AND ((r.lock_backend = 'postgres' AND NOT EXISTS (SELECT FROM held h WHERE h.lock_key = r.lock_key))
           OR (r.lock_backend = 'lease' AND NOT EXISTS (SELECT FROM {{schema}}.leases l
                                                       WHERE l.lock_key::text = r.lock_key AND l.expires_at > now())))
    ORDER BY r.id FOR UPDATE OF r),
  gone AS (
    UPDATE {{schema}}.runs SET status = 'abandoned', finished_at = now(),
           error = 'wrapper (pid ' || pid || ' on ' || host || ') vanished without recording an outcome'
    WHERE id IN (SELECT id FROM stale) AND status = 'running'
    RETURNING id)
  UPDATE {{schema}}.requests SET status = 'failed', finished_at = now()
  WHERE run_id IN (SELECT id FROM gone) AND status = 'running';
  SELECT jsonb_build_object('id', id, 'host', host, 'pid', pid, 'started_at', started_at, 'max_running', coalesce(max_running, 1),
                            'wrapper_start', wrapper_start, 'lock_backend', lock_backend, 'lock_key', lock_key)
  INTO found FROM {{schema}}.runs
  WHERE job = job_name AND status = 'running' AND coalesce(max_running, 1) <> slot_count
    AND (host = host_name OR lock_backend IS NULL OR lock_backend NOT IN ('flock', 'lockfile', 'none'))
  ORDER BY id LIMIT 1;
  RETURN found;
END $$;
