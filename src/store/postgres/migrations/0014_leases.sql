-- Leases (issue 20, `-l lease`): a fleet lock that lives in a row rather than in a server
-- session, so it holds no connection, works through any pooler, and fences. One row per lock
-- key while held: its holder (host, pid, run), an epoch that only grows (the fencing token:
-- one sequence for all keys, so a key's next holder always has a higher one, even after its
-- row went), and its expiry on the server's clock. A row whose expires_at has passed is free;
-- a released lease's row is deleted.
CREATE SEQUENCE {{schema}}.lease_epochs;
CREATE TABLE {{schema}}.leases (
  lock_key    bigint PRIMARY KEY,
  job         text NOT NULL,
  host        text NOT NULL,
  pid         integer NOT NULL,
  run_id      bigint,
  epoch       bigint NOT NULL DEFAULT nextval('{{schema}}.lease_epochs'),
  ttl_ms      integer NOT NULL,
  acquired_at timestamptz NOT NULL DEFAULT now(),
  renewed_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL
);

-- The lease key of a job, as cronguard computes it (lock/postgres.ts's advisoryKey): the
-- first 8 bytes of sha256('cronguard:' || name), or of 'cronguard:' || schema || ':' || name
-- in a schema other than `cronguard`, as a signed bigint. The schema is this table's own.
CREATE FUNCTION {{schema}}.lease_key(job text) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT ('x' || left(encode(sha256(convert_to('cronguard:' || CASE WHEN n.nspname = 'cronguard' THEN '' ELSE n.nspname || ':' END
                                                || job, 'UTF8')), 'hex'), 16))::bit(64)::bigint
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.oid = pg_typeof(NULL::{{schema}}.leases);
$$;

-- For a DBA: takes job's lease for `ttl` if it is free (no run starts meanwhile; one running
-- now keeps it, and this returns NULL). Returns the epoch taken. Break one with
-- DELETE FROM <schema>.leases WHERE job = '...': its holder stops its command at its next renewal.
CREATE FUNCTION {{schema}}.take_lease(job text, ttl interval) RETURNS bigint LANGUAGE sql AS $$
  INSERT INTO {{schema}}.leases AS l (lock_key, job, host, pid, ttl_ms, expires_at)
  VALUES ({{schema}}.lease_key(job), job, 'sql:' || session_user, 0, (extract(epoch FROM ttl) * 1000)::integer, now() + ttl)
  ON CONFLICT (lock_key) DO UPDATE SET job = excluded.job, host = excluded.host, pid = 0, run_id = NULL,
    epoch = nextval('{{schema}}.lease_epochs'), ttl_ms = excluded.ttl_ms, acquired_at = now(), renewed_at = now(),
    expires_at = excluded.expires_at
  WHERE l.expires_at <= now()
  RETURNING epoch;
$$;

-- The run path's admission (0013's) with the lease: with p.lease (the key) and p.lease_ttl_ms
-- the lease is taken by compare-and-set first, in the same statement and transaction as the
-- rest of the admission, so the round trips do not grow. A lease is a row: if anything below
-- fails, the transaction takes it back with everything else. Refused by the log's rules, the
-- lease goes at once (kept for a loop that waits for work, as the advisory lock is).
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
    ELSIF NOT ((p->>'keep_lock')::boolean AND result->>'reason' IN ('idle', 'interval')) THEN
      DELETE FROM {{schema}}.leases l WHERE l.lock_key = lease;
      taken := NULL;
    END IF;
  END IF;
  RETURN jsonb_build_object('r', result, 'orphaned', settled->'orphaned', 'backend', pg_backend_pid(),
                            'holding', (advisory IS NOT NULL AND {{schema}}.holds(advisory)) OR taken IS NOT NULL, 'epoch', taken);
END $$;
