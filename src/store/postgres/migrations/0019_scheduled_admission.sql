-- --scheduled in the admission (issue 24): admit() of 0012 decides, with nothing requested,
-- whether the job's stored schedule is due (0018), on the job's row locked as for the
-- interval, after the runs that ended were abandoned (their starts do not count). Not due:
-- 'schedule'; no schedule it can read: 'unscheduled', with `warn` on the first such refusal
-- of a day. admit(p, guarded) of 0014 keeps a loop's lease on either refusal too, as on
-- 'idle' and 'interval'. Both otherwise as they were.
CREATE OR REPLACE FUNCTION {{schema}}.admit(p jsonb) RETURNS jsonb LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  job_name   text        := p->>'job';
  host_name  text        := p->>'host';
  tick_at    timestamptz := (p->>'tick')::timestamptz;
  ahead      timestamptz := (p->>'now')::timestamptz + interval '1 minute';
  started    timestamptz := (p->>'started_at')::timestamptz;
  took_lock  boolean     := false;
  version    integer;
  holder     jsonb;
  paused     record;
  others     jsonb;
  claimed    jsonb       := '[]';
  claimed_id bigint[]    := '{}';
  last_start timestamptz;
  new_id     bigint;
  scheduled  boolean     := coalesce((p->>'scheduled')::boolean, false) AND NOT (p->>'manual')::boolean;
  sched      record;
  verdict    jsonb;
  warn       boolean;
BEGIN
  SELECT max(m.version) INTO version FROM {{schema}}.schema_migrations m;
  IF p ? 'key' THEN
    IF NOT pg_try_advisory_lock((p->>'key')::bigint) THEN
      SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at FROM {{schema}}.runs
        WHERE job = job_name AND status = 'running' ORDER BY id DESC LIMIT 1) r;
      IF (p->>'count_skip')::boolean THEN PERFORM {{schema}}.count_skip(job_name, (holder->>'id')::bigint); END IF;
      RETURN jsonb_build_object('admitted', false, 'reason', 'locked', 'holder', holder, 'version', version);
    END IF;
    took_lock := true;
  END IF;

  -- A paused job runs nothing; its requests wait.
  SELECT disabled_reason AS reason, disabled_at AS since, disabled_by AS by INTO paused FROM {{schema}}.jobs WHERE name = job_name AND disabled;
  IF FOUND THEN
    IF took_lock THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
    RETURN jsonb_build_object('admitted', false, 'reason', 'disabled', 'disabled', to_jsonb(paused), 'version', version);
  END IF;

  -- Holding the lock proves the runs that held it before have ended: the postgres lock on
  -- any host, a local lock on this one. Their requests failed with them.
  WITH gone AS (
    UPDATE {{schema}}.runs SET status = 'abandoned', finished_at = now(),
           error = 'wrapper (pid ' || pid || ' on ' || host || ') vanished without recording an outcome'
    WHERE job = job_name AND status = 'running'
      AND ((lock_backend IS NULL AND took_lock)
           OR (lock_backend = p->>'lock_backend' AND lock_key = p->>'lock_key' AND (took_lock OR host = host_name)))
    RETURNING id)
  UPDATE {{schema}}.requests SET status = 'failed', finished_at = now()
  WHERE run_id IN (SELECT id FROM gone) AND status = 'running';
  SELECT coalesce(jsonb_agg(to_jsonb(r)), '[]') INTO others FROM (SELECT id, pid, wrapper_start, lock_backend, lock_key
    FROM {{schema}}.runs WHERE job = job_name AND host = host_name AND status = 'running') r;

  -- Due requests: all of them in a --batch run (up to batch_max), else every one without
  -- arguments and the oldest one with. SKIP LOCKED: two claimers never take the same one.
  IF coalesce((p->>'claim')::boolean, true) THEN
    WITH due AS (
      SELECT q.id, q.args FROM {{schema}}.requests q
      WHERE q.job = job_name AND q.status = 'pending' AND q.not_before <= now()
        AND ((p->>'batch')::boolean OR q.args = '{}'
             OR q.id = (SELECT min(x.id) FROM {{schema}}.requests x
                        WHERE x.job = job_name AND x.status = 'pending' AND x.not_before <= now() AND x.args <> '{}'))
      ORDER BY q.id LIMIT coalesce((p->>'batch_max')::integer, 2147483647)
      FOR UPDATE SKIP LOCKED)
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', id, 'args', to_jsonb(args)) ORDER BY id), '[]'),
           coalesce(array_agg(id ORDER BY id), '{}')
    INTO claimed, claimed_id FROM due;
  END IF;

  IF cardinality(claimed_id) = 0 THEN
    -- Hosts that each hold only a local lock decide the interval and the tick one at a time,
    -- on the job's row, and each by statements that start after that row is theirs: a
    -- statement sees what was committed when it started, so a claim that waited for another
    -- host's inside one statement would not see that host's run, and both would run.
    IF p->>'min_interval_ms' IS NOT NULL OR scheduled OR ((p->>'fleet')::boolean AND tick_at IS NOT NULL) THEN
      INSERT INTO {{schema}}.jobs (name) VALUES (job_name) ON CONFLICT (name) DO NOTHING;
      PERFORM 1 FROM {{schema}}.jobs WHERE name = job_name FOR UPDATE;
    END IF;
    IF (p->>'on_request')::boolean AND p->>'min_interval_ms' IS NULL THEN
      IF took_lock AND NOT (p->>'keep_lock')::boolean THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
      RETURN jsonb_build_object('admitted', false, 'reason', 'idle', 'running', others, 'version', version);
    END IF;
    -- --scheduled: due when the stored schedule's latest fire came after the last start
    -- (0018's schedule_due); without a schedule it can read, the job does not run, and one
    -- run a day is told to say so.
    IF scheduled THEN
      SELECT schedule, unscheduled_said_at AS said INTO sched FROM {{schema}}.jobs WHERE name = job_name;
      SELECT started_at INTO last_start FROM {{schema}}.runs WHERE job = job_name AND status <> 'abandoned'
      ORDER BY id DESC LIMIT 1;
      verdict := CASE WHEN sched.schedule IS NULL THEN jsonb_build_object('problem', NULL)
                      ELSE {{schema}}.schedule_due(sched.schedule, p->>'zone', last_start, started,
                                                   coalesce((p->>'early')::boolean, true)) END;
      IF NOT coalesce((verdict->>'due')::boolean, false) THEN
        IF took_lock AND NOT (p->>'keep_lock')::boolean THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
        IF verdict ? 'problem' THEN
          warn := sched.said IS NULL OR sched.said <= started - interval '1 day';
          IF warn THEN UPDATE {{schema}}.jobs SET unscheduled_said_at = started WHERE name = job_name; END IF;
          RETURN jsonb_build_object('admitted', false, 'reason', 'unscheduled', 'problem', verdict->'problem', 'warn', warn,
                                    'running', others, 'version', version);
        END IF;
        RETURN jsonb_build_object('admitted', false, 'reason', 'schedule', 'schedule', sched.schedule, 'last_started_at', last_start,
                                  'running', others, 'version', version);
      END IF;
    END IF;
    IF p->>'min_interval_ms' IS NOT NULL AND NOT (p->>'manual')::boolean THEN
      -- The latest run by id, not max(started_at): one index probe however long the log.
      SELECT started_at INTO last_start FROM {{schema}}.runs WHERE job = job_name AND status <> 'abandoned'
      ORDER BY id DESC LIMIT 1;
      IF last_start > started - make_interval(secs => ((p->>'min_interval_ms')::numeric
                                                       - least((p->>'min_interval_ms')::numeric / 10, 30000)) / 1000) THEN
        IF took_lock AND NOT (p->>'keep_lock')::boolean THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
        RETURN jsonb_build_object('admitted', false, 'reason', 'interval', 'last_started_at', last_start, 'running', others,
                                  'version', version);
      END IF;
    END IF;
  END IF;

  -- One run per tick (see 0002): claim the minute on the job's row; ticks only move
  -- forward, the same host may claim again, a tick beyond the caller's clock is bogus. A
  -- tick is served by a run that started its command or still may: not by one whose
  -- wrapper was gone before (the reply to this statement lost with its connection). A run
  -- that serves requests claims the minute as well, so no other host's invocation of it
  -- runs the job again; it runs whether or not the minute was still free, since its
  -- requests were made to be served.
  IF (p->>'fleet')::boolean AND tick_at IS NOT NULL THEN
    INSERT INTO {{schema}}.jobs AS j (name, tick, tick_host) VALUES (job_name, tick_at, host_name)
    ON CONFLICT (name) DO UPDATE
    SET tick = CASE WHEN j.tick > ahead THEN excluded.tick ELSE greatest(j.tick, excluded.tick) END, tick_host = excluded.tick_host
    WHERE j.tick IS NULL OR excluded.tick > j.tick OR j.tick_host = excluded.tick_host OR j.tick > ahead
       OR NOT EXISTS (SELECT 1 FROM {{schema}}.runs r WHERE r.job = job_name AND r.tick = j.tick AND r.host = j.tick_host
                      AND (r.status = 'running' OR r.child_pid IS NOT NULL));
    IF NOT FOUND AND cardinality(claimed_id) = 0 THEN
      IF took_lock THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
      SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at FROM {{schema}}.runs
        WHERE job = job_name AND tick >= tick_at AND tick <= ahead AND host <> host_name ORDER BY id DESC LIMIT 1) r;
      PERFORM {{schema}}.count_skip(job_name, (holder->>'id')::bigint);
      RETURN jsonb_build_object('admitted', false, 'reason', 'tick', 'holder', holder, 'running', others, 'version', version);
    END IF;
  END IF;

  new_id := nextval(pg_get_serial_sequence('{{schema}}.runs', 'id'));
  INSERT INTO {{schema}}.runs (id, status, job, host, trigger, attempt, pid, username, command, started_at, tick,
                               lock_backend, lock_key, run_key, invoked_at, wrapper_start, request_id)
  VALUES (new_id, 'running', job_name, host_name,
          CASE WHEN cardinality(claimed_id) > 0 THEN 'request' ELSE p->>'trigger' END,
          (p->>'attempt')::integer, (p->>'pid')::integer, p->>'username', p->>'command', started, tick_at,
          p->>'lock_backend', p->>'lock_key', p->>'run_key', (p->>'invoked_at')::timestamptz, p->>'wrapper_start',
          claimed_id[1]);
  UPDATE {{schema}}.requests SET status = 'running', claimed_at = now(), attempts = attempts + 1, run_id = new_id
  WHERE id = ANY(claimed_id);
  UPDATE {{schema}}.jobs SET command = p->>'command', host = host_name, min_interval_ms = (p->>'min_interval_ms')::bigint,
         last_seen_at = started
  WHERE name = job_name;
  RETURN jsonb_build_object('admitted', true, 'id', new_id, 'requests', claimed, 'running', others, 'version', version);
END $$;

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
    ELSIF NOT ((p->>'keep_lock')::boolean AND result->>'reason' IN ('idle', 'interval', 'schedule', 'unscheduled')) THEN
      DELETE FROM {{schema}}.leases l WHERE l.lock_key = lease;
      taken := NULL;
    END IF;
  END IF;
  RETURN jsonb_build_object('r', result, 'orphaned', settled->'orphaned', 'backend', pg_backend_pid(),
                            'holding', (advisory IS NOT NULL AND {{schema}}.holds(advisory)) OR taken IS NOT NULL, 'epoch', taken);
END $$;
