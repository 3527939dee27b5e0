-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.admit_lease(p jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE SET lock_timeout = '5s' AS $$
DECLARE
  lease bigint := (p->>'lease')::bigint;
  taken bigint;
BEGIN
  -- The row is locked by whoever writes it first; the others wait for that transaction and
  -- then see its lease unexpired: exactly one of any number of racing admissions takes it.
  INSERT INTO {{schema}}.leases AS l (lock_key, job, host, pid, ttl_ms, expires_at)
  VALUES (lease, p->>'job', p->>'host', (p->>'pid')::integer, (p->>'lease_ttl_ms')::integer,
          now() + make_interval(secs => (p->>'lease_ttl_ms')::numeric / 1000))
  ON CONFLICT (lock_key) DO UPDATE SET job = excluded.job, host = excluded.host, pid = excluded.pid, run_id = NULL,
    epoch = nextval('{{schema}}.lease_epochs'), ttl_ms = excluded.ttl_ms, acquired_at = now(), renewed_at = now(),
    expires_at = excluded.expires_at
  WHERE l.expires_at <= now()
  RETURNING l.epoch INTO taken;
  IF taken IS NULL THEN
    -- Refused as admit() refuses when the advisory lock is held.
    RETURN jsonb_build_object('r', {{schema}}.locked_refusal(p, (SELECT max(m.version) FROM {{schema}}.schema_migrations m)));
  END IF;
  -- Holding the lease proves its runs before ended (their holders stopped their commands
  -- before the lease could expire): rows they left running were abandoned, on any host.
  WITH gone AS (
    UPDATE {{schema}}.runs SET status = 'abandoned', finished_at = now(),
           error = 'wrapper (pid ' || pid || ' on ' || host || ') vanished without recording an outcome'
    WHERE job = p->>'job' AND status = 'running' AND lock_backend = 'lease' AND runs.lock_key = p->>'lock_key'
    RETURNING id)
  UPDATE {{schema}}.requests SET status = 'failed', finished_at = now()
  WHERE run_id IN (SELECT id FROM gone) AND status = 'running';
  RETURN jsonb_build_object('epoch', taken);
END $$;
