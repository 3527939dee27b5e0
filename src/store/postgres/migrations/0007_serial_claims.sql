-- admit() of 0005, with the job's row locked before the minimum interval and the fleet's
-- tick are decided. Six hosts with local locks and the shared log, started in the same
-- minute, could all run: each waited inside its tick claim for the first host's claim to
-- commit, then judged it by a snapshot older than that host's run.
CREATE OR REPLACE FUNCTION {{schema}}.admit(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
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
    IF p->>'min_interval_ms' IS NOT NULL OR ((p->>'fleet')::boolean AND tick_at IS NOT NULL) THEN
      INSERT INTO {{schema}}.jobs (name) VALUES (job_name) ON CONFLICT (name) DO NOTHING;
      PERFORM 1 FROM {{schema}}.jobs WHERE name = job_name FOR UPDATE;
    END IF;
    IF (p->>'on_request')::boolean AND p->>'min_interval_ms' IS NULL THEN
      IF took_lock AND NOT (p->>'keep_lock')::boolean THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
      RETURN jsonb_build_object('admitted', false, 'reason', 'idle', 'running', others, 'version', version);
    END IF;
    IF p->>'min_interval_ms' IS NOT NULL AND NOT (p->>'manual')::boolean THEN
      -- The latest run by id, not max(started_at): one index probe however long the log.
      SELECT started_at INTO last_start FROM {{schema}}.runs WHERE job = job_name AND status <> 'abandoned'
      ORDER BY id DESC LIMIT 1;
      IF last_start > started - make_interval(secs => (p->>'min_interval_ms')::numeric / 1000) THEN
        IF took_lock AND NOT (p->>'keep_lock')::boolean THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
        RETURN jsonb_build_object('admitted', false, 'reason', 'interval', 'last_started_at', last_start, 'running', others,
                                  'version', version);
      END IF;
    END IF;
    -- One run per tick (see 0002): claim the minute on the job's row; ticks only move
    -- forward, the same host may claim again, a tick beyond the caller's clock is bogus. A
    -- tick is served by a run that started its command or still may: not by one whose
    -- wrapper was gone before (the reply to this statement lost with its connection).
    IF (p->>'fleet')::boolean AND tick_at IS NOT NULL THEN
      INSERT INTO {{schema}}.jobs AS j (name, tick, tick_host) VALUES (job_name, tick_at, host_name)
      ON CONFLICT (name) DO UPDATE
      SET tick = CASE WHEN j.tick > ahead THEN excluded.tick ELSE greatest(j.tick, excluded.tick) END, tick_host = excluded.tick_host
      WHERE j.tick IS NULL OR excluded.tick > j.tick OR j.tick_host = excluded.tick_host OR j.tick > ahead
         OR NOT EXISTS (SELECT 1 FROM {{schema}}.runs r WHERE r.job = job_name AND r.tick = j.tick AND r.host = j.tick_host
                        AND (r.status = 'running' OR r.child_pid IS NOT NULL));
      IF NOT FOUND THEN
        IF took_lock THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
        SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at FROM {{schema}}.runs
          WHERE job = job_name AND tick >= tick_at AND tick <= ahead AND host <> host_name ORDER BY id DESC LIMIT 1) r;
        PERFORM {{schema}}.count_skip(job_name, (holder->>'id')::bigint);
        RETURN jsonb_build_object('admitted', false, 'reason', 'tick', 'holder', holder, 'running', others, 'version', version);
      END IF;
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
