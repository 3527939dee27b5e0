-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.take_lease(job text, ttl interval) RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  expires timestamptz := now() + ttl;
  taken   bigint;
BEGIN
  IF job IS NULL OR expires IS NULL OR expires <= now() OR NOT isfinite(expires) THEN
    RAISE EXCEPTION 'take_lease(%, %): needs a job and a positive, finite ttl such as ''1 hour'' or ''30 days''',
      coalesce(quote_literal(job), 'NULL'), coalesce(quote_literal(ttl), 'NULL')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO {{schema}}.leases AS l (lock_key, job, host, pid, ttl_ms, expires_at)
  VALUES ({{schema}}.lease_key(job), job, 'sql:' || session_user, 0, (extract(epoch FROM expires - now()) * 1000)::bigint, expires)
  ON CONFLICT (lock_key) DO UPDATE SET job = excluded.job, host = excluded.host, pid = 0, run_id = NULL,
    epoch = nextval('{{schema}}.lease_epochs'), ttl_ms = excluded.ttl_ms, acquired_at = now(), renewed_at = now(),
    expires_at = excluded.expires_at
  WHERE l.expires_at <= now()
  RETURNING l.epoch INTO taken;
  RETURN taken;
END $$;
