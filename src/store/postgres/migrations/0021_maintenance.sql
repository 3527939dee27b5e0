-- Maintenance (issue 25). A job's pause may end by itself (`disable NAME --until`): it holds
-- while disabled_until is NULL or later than now(). The fleet's pause (`disable --all`) is
-- one row, there from the start, which every admission reads (FOR SHARE); every pause and
-- resume is kept in pause_events (job NULL: the fleet's). admit(p) of 0019 refuses a job
-- paused either way ('disabled', with `disabled.fleet` and `disabled.until`); otherwise as it
-- was. admit(p, guarded) of 0019 calls it and frees a lease on 'disabled' as before: unchanged.
ALTER TABLE {{schema}}.jobs ADD COLUMN disabled_until timestamptz;
CREATE TABLE {{schema}}.fleet_pause (
  id        integer PRIMARY KEY CHECK (id = 1),
  paused    boolean NOT NULL DEFAULT false,
  reason    text,
  paused_at timestamptz,
  paused_by text,
  until_at  timestamptz
);
INSERT INTO {{schema}}.fleet_pause (id) VALUES (1);
CREATE TABLE {{schema}}.pause_events (
  id       bigserial PRIMARY KEY,
  job      text,
  action   text NOT NULL CHECK (action IN ('pause', 'resume')),
  event_at timestamptz NOT NULL,
  event_by text NOT NULL,
  reason   text,
  until_at timestamptz
);
CREATE INDEX pause_events_job ON {{schema}}.pause_events (job, id);

-- admit(p) takes its shared lock on the fleet's row before it reads either pause, and a
-- job's pause locks that row FOR UPDATE first (postgres-sql-jobs.ts): `disable NAME`, like a
-- pause of the fleet, then waits for the admissions that read "not paused" and are still
-- at work, so a --drain after it sees their runs.
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
  held       boolean;
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

  -- A paused job runs nothing; its requests wait. The fleet's row is locked (shared) before
  -- either pause is read, and a pause of the fleet (an UPDATE of that row) or of one job
  -- (which locks that row FOR UPDATE first) waits for the admissions under way, so a drain
  -- after it sees the runs they admitted; an admission after it reads it, each statement
  -- here seeing what was committed when it began. The job's own pause holds until its
  -- until_at; the fleet's holds for every job, one without a row too.
  PERFORM 1 FROM {{schema}}.fleet_pause f WHERE f.id = 1 FOR SHARE;
  SELECT disabled_reason AS reason, disabled_at AS since, disabled_by AS by, disabled_until AS until, false AS fleet
  INTO paused FROM {{schema}}.jobs
  WHERE name = job_name AND disabled AND (disabled_until IS NULL OR disabled_until > now());
  held := FOUND;
  IF NOT held THEN
    SELECT f.reason, f.paused_at AS since, f.paused_by AS by, f.until_at AS until, true AS fleet
    INTO paused FROM {{schema}}.fleet_pause f WHERE f.id = 1 AND f.paused AND (f.until_at IS NULL OR f.until_at > now());
    held := FOUND;
  END IF;
  IF held THEN
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
