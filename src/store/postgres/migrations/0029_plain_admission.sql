-- A plain admission (issue 37: no schedule, interval, spacing, lease or request, one slot)
-- compiles and runs only what it uses, on a server backend that is new for each run:
-- - the claims of runs that ended are settled (settle_claims()) only when the job has a
--   request still running, and due requests claimed only when one is pending;
-- - the runs the lock proves ended fail their requests only when there are such runs, and a
--   run's claimed requests are marked only when it claimed some;
-- - the job's row is locked by one statement once it exists, and written once: the claim of
--   the tick records the admission there, which a later statement did apart before;
-- - the run's id comes from its column's default, not from a lookup of its sequence;
-- - the refusal for a held lock, which admit_lease() shares, is locked_refusal(), compiled
--   only when a lock is held.

-- The refusal of an admission whose lock (the advisory lock, a lease) another run holds: the
-- holder, read for the skip, is a running copy given another N if there is one that may still
-- run (slot_disagreement()), and such a copy is refused even while every slot it would take is
-- held. Apart from admit(), which a plain admission compiles whole.
CREATE FUNCTION {{schema}}.locked_refusal(p jsonb, version integer) RETURNS jsonb LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  slot_count integer := coalesce((p->>'max_running')::integer, 1);
  holder     jsonb;
  disagrees  jsonb;
BEGIN
  SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at, coalesce(max_running, 1) AS max_running FROM {{schema}}.runs
    WHERE job = p->>'job' AND status = 'running' ORDER BY coalesce(max_running, 1) <> slot_count DESC, id DESC LIMIT 1) r;
  IF (holder->>'max_running')::integer <> slot_count THEN
    disagrees := {{schema}}.slot_disagreement(p);
    IF disagrees IS NOT NULL THEN
      RETURN jsonb_build_object('admitted', false, 'reason', 'slots', 'holder', disagrees - 'max_running',
                                'max_running', disagrees->'max_running', 'version', version);
    END IF;
    SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at FROM {{schema}}.runs
      WHERE job = p->>'job' AND status = 'running' ORDER BY coalesce(max_running, 1) = slot_count DESC, id DESC LIMIT 1) r;
  END IF;
  IF (p->>'count_skip')::boolean THEN PERFORM {{schema}}.count_skip(p->>'job', (holder->>'id')::bigint); END IF;
  RETURN jsonb_build_object('admitted', false, 'reason', 'locked', 'holder', holder, 'version', version);
END $$;

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
  new_id     bigint;
  scheduled  boolean     := coalesce((p->>'scheduled')::boolean, false) AND NOT (p->>'manual')::boolean;
  verdict    jsonb;
  slot_count integer     := coalesce((p->>'max_running')::integer, 1);
  disagrees  jsonb;
  ticked     boolean;
  recorded   boolean     := false;
  gone_id    bigint[];
BEGIN
  SELECT max(m.version) INTO version FROM {{schema}}.schema_migrations m;
  IF p ? 'key' THEN
    IF NOT pg_try_advisory_lock((p->>'key')::bigint) THEN
      RETURN {{schema}}.locked_refusal(p, version);
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
  SELECT array_agg(id) INTO gone_id FROM gone;
  IF gone_id IS NOT NULL THEN
    UPDATE {{schema}}.requests SET status = 'failed', finished_at = now() WHERE run_id = ANY(gone_id) AND status = 'running';
  END IF;
  -- This host's running rows (whose wrappers only the caller can check), and in the same look
  -- a running copy given another --max-running: every copy must agree on N, or one's slots
  -- would not count the other's runs. Seen once committed: two first copies that disagree,
  -- admitted at the same instant under different slots' locks, may both run.
  SELECT coalesce(jsonb_agg(jsonb_build_object('id', id, 'pid', pid, 'wrapper_start', wrapper_start,
                                               'lock_backend', lock_backend, 'lock_key', lock_key))
                  FILTER (WHERE host = host_name), '[]'),
         (array_agg(jsonb_build_object('id', id, 'host', host, 'pid', pid, 'started_at', started_at,
                                       'max_running', coalesce(max_running, 1)) ORDER BY id)
          FILTER (WHERE coalesce(max_running, 1) <> slot_count))[1]
  INTO others, disagrees FROM {{schema}}.runs WHERE job = job_name AND status = 'running';
  IF disagrees IS NOT NULL THEN disagrees := {{schema}}.slot_disagreement(p); END IF;
  IF disagrees IS NOT NULL THEN
    IF took_lock THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
    RETURN jsonb_build_object('admitted', false, 'reason', 'slots', 'holder', disagrees - 'max_running',
                              'max_running', disagrees->'max_running', 'running', others, 'version', version);
  END IF;

  -- Due requests: all of them in a --batch run (up to batch_max), else every one without
  -- arguments and the oldest one with. SKIP LOCKED: two claimers never take the same one.
  -- Most jobs have none pending: one look at the index of pending requests says so.
  IF coalesce((p->>'claim')::boolean, true)
     AND EXISTS (SELECT FROM {{schema}}.requests q WHERE q.job = job_name AND q.status = 'pending') THEN
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
      PERFORM 1 FROM {{schema}}.jobs WHERE name = job_name FOR UPDATE;
      IF NOT FOUND THEN
        INSERT INTO {{schema}}.jobs (name) VALUES (job_name) ON CONFLICT (name) DO NOTHING;
        PERFORM 1 FROM {{schema}}.jobs WHERE name = job_name FOR UPDATE;
      END IF;
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
  -- A claim on the job's row admits the run: it records there what the admission would
  -- (the command, the host, the interval, when it was last seen), so the row is written once.
  IF (p->>'fleet')::boolean AND tick_at IS NOT NULL THEN
    INSERT INTO {{schema}}.jobs AS j (name, tick, tick_host, command, host, min_interval_ms, last_seen_at)
    VALUES (job_name, tick_at, host_name, p->>'command', host_name, (p->>'min_interval_ms')::bigint, started)
    ON CONFLICT (name) DO UPDATE
    SET tick = CASE WHEN j.tick > ahead THEN excluded.tick ELSE greatest(j.tick, excluded.tick) END, tick_host = excluded.tick_host,
        command = excluded.command, host = excluded.host, min_interval_ms = excluded.min_interval_ms, last_seen_at = excluded.last_seen_at
    WHERE j.tick IS NULL OR excluded.tick > j.tick OR j.tick_host = excluded.tick_host OR j.tick > ahead
       OR NOT EXISTS (SELECT 1 FROM {{schema}}.runs r WHERE r.job = job_name AND r.tick = j.tick AND r.host = j.tick_host
                      AND (r.status = 'running' OR r.child_pid IS NOT NULL));
    ticked := FOUND;
    recorded := ticked;
    -- The job's row holds the minute's first claim; with --max-running N, N - 1 more.
    IF NOT ticked AND slot_count > 1 THEN ticked := {{schema}}.claim_tick(p, slot_count); END IF;
    IF NOT ticked AND cardinality(claimed_id) = 0 THEN
      IF took_lock THEN PERFORM pg_advisory_unlock((p->>'key')::bigint); END IF;
      SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at FROM {{schema}}.runs
        WHERE job = job_name AND tick >= tick_at AND tick <= ahead AND host <> host_name ORDER BY id DESC LIMIT 1) r;
      PERFORM {{schema}}.count_skip(job_name, (holder->>'id')::bigint);
      RETURN jsonb_build_object('admitted', false, 'reason', 'tick', 'holder', holder, 'running', others, 'version', version);
    END IF;
  END IF;

  INSERT INTO {{schema}}.runs (status, job, host, trigger, attempt, pid, username, command, started_at, tick,
                               lock_backend, lock_key, run_key, invoked_at, wrapper_start, request_id, slot, max_running)
  VALUES ('running', job_name, host_name,
          CASE WHEN cardinality(claimed_id) > 0 THEN 'request' ELSE p->>'trigger' END,
          (p->>'attempt')::integer, (p->>'pid')::integer, p->>'username', p->>'command', started, tick_at,
          p->>'lock_backend', p->>'lock_key', p->>'run_key', (p->>'invoked_at')::timestamptz, p->>'wrapper_start',
          claimed_id[1], (p->>'slot')::integer, slot_count)
  RETURNING id INTO new_id;
  IF cardinality(claimed_id) > 0 THEN
    UPDATE {{schema}}.requests SET status = 'running', claimed_at = now(), attempts = attempts + 1, run_id = new_id
    WHERE id = ANY(claimed_id);
  END IF;
  IF NOT recorded THEN
    UPDATE {{schema}}.jobs SET command = p->>'command', host = host_name, min_interval_ms = (p->>'min_interval_ms')::bigint,
           last_seen_at = started
    WHERE name = job_name;
  END IF;
  RETURN jsonb_build_object('admitted', true, 'id', new_id, 'requests', claimed, 'running', others, 'version', version);
END $$;


CREATE OR REPLACE FUNCTION {{schema}}.admit(p jsonb, guarded boolean) RETURNS jsonb LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
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
  -- advisory lock is taken next (by settle_claims() or admit()), a local one before this statement.
  -- Not now() (the transaction's start, before a lease's row lock was waited for) nor the
  -- caller's time (before a pooler held the statement, paused, for seconds). To the
  -- millisecond, as the caller keeps it: a spooled record of the run names its row by it.
  p := jsonb_set(p, '{started_at}', to_jsonb(date_trunc('milliseconds', clock_timestamp())));
  BEGIN
    -- Only a request still running can have been left by a run that ended: most jobs have
    -- none, and then settle_claims() is neither compiled nor run.
    IF EXISTS (SELECT FROM {{schema}}.requests q WHERE q.job = p->>'job' AND q.status = 'running') THEN
      settled := {{schema}}.settle_claims(p);
    ELSE
      settled := p || '{"orphaned": []}';
    END IF;
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

CREATE OR REPLACE FUNCTION {{schema}}.admit_lease(p jsonb) RETURNS jsonb LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
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
