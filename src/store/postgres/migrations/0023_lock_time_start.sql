-- A run's started_at is the moment it got its lock on the server's clock (issue 35, item 10):
-- admit(p, guarded) of 0019 stamps p's started_at with clock_timestamp() once the lease is
-- taken (or before settle_claims() takes the advisory lock), for admit(p) to record and to
-- judge the interval and the schedule by, and returns it (`started_at`); otherwise as it was.
-- The caller's own time was taken before the statement was sent, so a statement a pooler
-- held (PgBouncer's PAUSE) recorded the run as started seconds before it had its lock.
CREATE OR REPLACE FUNCTION {{schema}}.admit(p jsonb, guarded boolean) RETURNS jsonb LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  advisory bigint := (p->>'key')::bigint;
  lease    bigint := (p->>'lease')::bigint;
  taken    bigint;
  holder   jsonb;
  settled  jsonb;
  result   jsonb;
BEGIN
  IF advisory IS NOT NULL AND {{schema}}.holds(advisory) THEN
    RETURN jsonb_build_object('r', jsonb_build_object('admitted', false, 'reason', 'reentered'), 'backend', pg_backend_pid());
  END IF;
  IF lease IS NOT NULL THEN
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
      SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at FROM {{schema}}.runs
        WHERE job = p->>'job' AND status = 'running' ORDER BY id DESC LIMIT 1) r;
      IF (p->>'count_skip')::boolean THEN PERFORM {{schema}}.count_skip(p->>'job', (holder->>'id')::bigint); END IF;
      RETURN jsonb_build_object('r', jsonb_build_object('admitted', false, 'reason', 'locked', 'holder', holder,
                                'version', (SELECT max(m.version) FROM {{schema}}.schema_migrations m)));
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
  END IF;
  -- The run starts when it gets its lock, on the server's clock: a lease was taken just now, an
  -- advisory lock is taken first thing by settle_claims(), a local one before this statement.
  -- Not now() (the transaction's start, before a lease's row lock was waited for) nor the
  -- caller's time (before a pooler held the statement, paused, for seconds). To the
  -- millisecond, as the caller keeps it: a spooled record of the run names its row by it.
  p := jsonb_set(p, '{started_at}', to_jsonb(date_trunc('milliseconds', clock_timestamp())));
  BEGIN
    settled := {{schema}}.settle_claims(p);
    result := {{schema}}.admit(settled);
  EXCEPTION WHEN OTHERS THEN
    IF advisory IS NOT NULL AND {{schema}}.holds(advisory) THEN PERFORM pg_advisory_unlock(advisory); END IF;
    RAISE;
  END;
  IF lease IS NOT NULL THEN
    IF (result->>'admitted')::boolean THEN
      UPDATE {{schema}}.leases l SET run_id = (result->>'id')::bigint WHERE l.lock_key = lease;
    ELSIF NOT ((p->>'keep_lock')::boolean AND result->>'reason' IN ('idle', 'interval', 'schedule', 'unscheduled')) THEN
      DELETE FROM {{schema}}.leases l WHERE l.lock_key = lease;
      taken := NULL;
    END IF;
  END IF;
  RETURN jsonb_build_object('r', result, 'orphaned', settled->'orphaned', 'backend', pg_backend_pid(),
                            'holding', (advisory IS NOT NULL AND {{schema}}.holds(advisory)) OR taken IS NOT NULL, 'epoch', taken,
                            'started_at', p->'started_at');
END $$;
