-- admit() in parts (issue 37): PL/pgSQL compiles a function whole, once per server backend,
-- and a run's backend is new. A plain admission (no schedule, interval or spacing, no lease)
-- now compiles only what it runs: whether the job is due is admit_due(), called only when it
-- is asked, and the taking of a lease admit_lease(). The pooler's guard (0013) asks pg_locks
-- only on a backend that this session did not start, and `holding` asks it only after a
-- refusal: an admission under the advisory lock holds it.

CREATE OR REPLACE FUNCTION {{schema}}.admit_due(p jsonb, others jsonb, took_lock boolean, version integer) RETURNS jsonb LANGUAGE plpgsql VOLATILE SET lock_timeout = '5s' AS $$
DECLARE
  job_name   text        := p->>'job';
  started    timestamptz := (p->>'started_at')::timestamptz;
  scheduled  boolean     := coalesce((p->>'scheduled')::boolean, false) AND NOT (p->>'manual')::boolean;
  last_start timestamptz;
  sched      record;
  verdict    jsonb;
  warn       boolean;
BEGIN
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
  IF (p->>'min_interval_ms' IS NOT NULL OR p ? 'spacing_ms') AND NOT (p->>'manual')::boolean THEN
    -- The latest run by id, not max(started_at): one index probe however long the log.
    SELECT started_at INTO last_start FROM {{schema}}.runs WHERE job = job_name AND status <> 'abandoned'
    ORDER BY id DESC LIMIT 1;
    IF last_start > started - make_interval(secs => {{schema}}.due_after_ms(greatest((p->>'min_interval_ms')::numeric,
                                                                                    (p->>'spacing_ms')::numeric)) / 1000) THEN
      IF took_lock AND NOT (p->>'keep_lock')::boolean THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
      RETURN jsonb_build_object('admitted', false, 'reason', 'interval', 'last_started_at', last_start, 'running', others,
                                'version', version);
    END IF;
  END IF;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION {{schema}}.admit_lease(p jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE SET lock_timeout = '5s' AS $$
DECLARE
  lease  bigint := (p->>'lease')::bigint;
  taken  bigint;
  holder jsonb;
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
  RETURN jsonb_build_object('epoch', taken);
END $$;

CREATE OR REPLACE FUNCTION {{schema}}.admit(p jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE SET lock_timeout = '5s' AS $$
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
  new_id     bigint;
  scheduled  boolean     := coalesce((p->>'scheduled')::boolean, false) AND NOT (p->>'manual')::boolean;
  verdict    jsonb;
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
    IF p->>'min_interval_ms' IS NOT NULL OR p ? 'spacing_ms' OR scheduled OR ((p->>'fleet')::boolean AND tick_at IS NOT NULL) THEN
      INSERT INTO {{schema}}.jobs (name) VALUES (job_name) ON CONFLICT (name) DO NOTHING;
      PERFORM 1 FROM {{schema}}.jobs WHERE name = job_name FOR UPDATE;
    END IF;
    IF (p->>'on_request')::boolean AND p->>'min_interval_ms' IS NULL THEN
      IF took_lock AND NOT (p->>'keep_lock')::boolean THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
      RETURN jsonb_build_object('admitted', false, 'reason', 'idle', 'running', others, 'version', version);
    END IF;
    -- Whether the job is due (a stored schedule, an interval or a spacing): only when asked.
    IF scheduled OR p->>'min_interval_ms' IS NOT NULL OR p ? 'spacing_ms' THEN
      verdict := {{schema}}.admit_due(p, others, took_lock, version);
      IF verdict IS NOT NULL THEN RETURN verdict; END IF;
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

CREATE OR REPLACE FUNCTION {{schema}}.admit(p jsonb, guarded boolean) RETURNS jsonb LANGUAGE plpgsql VOLATILE SET lock_timeout = '5s' AS $$
DECLARE
  advisory bigint := (p->>'key')::bigint;
  lease    bigint := (p->>'lease')::bigint;
  taken    bigint;
  holding  boolean;
  settled  jsonb;
  result   jsonb;
BEGIN
  -- A server backend that this session started (`backend`: the pid it announced at the
  -- connection; the caller sends it while the session holds no lock) holds no lock this
  -- session did not take. Another one may be shared with other clients (a pooler).
  IF advisory IS NOT NULL AND pg_backend_pid() IS DISTINCT FROM (p->>'backend')::integer AND {{schema}}.holds(advisory) THEN
    RETURN jsonb_build_object('r', jsonb_build_object('admitted', false, 'reason', 'reentered'), 'backend', pg_backend_pid());
  END IF;
  IF lease IS NOT NULL THEN
    result := {{schema}}.admit_lease(p);
    IF result ? 'r' THEN RETURN result; END IF;
    taken := (result->>'epoch')::bigint;
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
  -- An admission under the advisory lock holds it; after a refusal, pg_locks tells.
  holding := taken IS NOT NULL OR (advisory IS NOT NULL AND coalesce((result->>'admitted')::boolean, false));
  IF NOT holding AND advisory IS NOT NULL THEN holding := {{schema}}.holds(advisory); END IF;
  RETURN jsonb_build_object('r', result, 'orphaned', settled->'orphaned', 'backend', pg_backend_pid(),
                            'holding', holding, 'epoch', taken,
                            'started_at', p->'started_at');
END $$;
