-- --max-running N (issue 39): the slot of the job's lock a run held (0 to N-1) and the N it
-- was run with (as SQLite's 0016; NULL, from before, reads as slot 0 of 1). admit(p) records
-- both from `slot` and `max_running`, refuses with `slots` when a running copy of the job was
-- given another N and may still run (slot_disagreement(); admit_lease() too, when the lease is
-- held), and lets N hosts start the job in a minute.
ALTER TABLE {{schema}}.runs ADD COLUMN slot integer, ADD COLUMN max_running integer;

-- The fleet's rule becomes at most N starts per tick: the first host of a minute claims it on
-- the job's row (jobs.tick, as before), the next N - 1 hosts each one of these, by the same
-- upsert, so two hosts can never both claim one of them (as MySQL's slot_ticks). They are the
-- minute's N starts, not the lock's slots: hosts that hold locks of their own (flock) all hold
-- their slot 0, and a quick run frees its lock's slot for the next host within the minute;
-- either way the minute's other starts are still the job's to make.
CREATE TABLE {{schema}}.slot_ticks (
  job       text        NOT NULL,
  slot      integer     NOT NULL,
  tick      timestamptz NOT NULL,
  tick_host text        NOT NULL,
  PRIMARY KEY (job, slot)
);

-- Called by admit() only when the job's row is another host's for the minute and N > 1, so a
-- plain admission never compiles it. Slots are tried in order: a host that claimed one this
-- minute claims it again, as on the job's row.
CREATE FUNCTION {{schema}}.claim_tick(p jsonb, slot_count integer) RETURNS boolean LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  job_name  text        := p->>'job';
  host_name text        := p->>'host';
  tick_at   timestamptz := (p->>'tick')::timestamptz;
  ahead     timestamptz := (p->>'now')::timestamptz + interval '1 minute';
BEGIN
  FOR i IN 1 .. slot_count - 1 LOOP
    INSERT INTO {{schema}}.slot_ticks AS t (job, slot, tick, tick_host) VALUES (job_name, i, tick_at, host_name)
    ON CONFLICT (job, slot) DO UPDATE
    SET tick = CASE WHEN t.tick > ahead THEN excluded.tick ELSE greatest(t.tick, excluded.tick) END, tick_host = excluded.tick_host
    WHERE excluded.tick > t.tick OR t.tick_host = excluded.tick_host OR t.tick > ahead
       OR NOT EXISTS (SELECT 1 FROM {{schema}}.runs r WHERE r.job = job_name AND r.tick = t.tick AND r.host = t.tick_host
                      AND (r.status = 'running' OR r.child_pid IS NOT NULL));
    IF FOUND THEN RETURN true; END IF;
  END LOOP;
  RETURN false;
END $$;

-- A running copy of the job given another N than p's, which may still run: every copy must
-- agree on N, but a copy counts only while it may still be running in a lock domain this one
-- shares (see disagreement.ts), or a row left by a wrapper that died (SIGKILL, a host gone for
-- good) in a slot no copy takes once N is lowered would refuse every later copy forever.
-- Called by admit() and admit_lease() only when such a row is running at all, so a plain
-- admission never compiles it.
-- - A row under a lock of this database (the advisory lock, a lease) counts while the lock is
--   held, by any backend: one nobody holds is abandoned here, as the lock's next holder would.
--   That is safe against its own holder: its run was inserted under the lock (taken first by
--   admit()), and finish() writes its outcome before letting the lock go, so a row found
--   running whose lock is free has lost its holder; an outcome being written meanwhile wins,
--   the row locked and read again before it is changed. Rows are locked in order of id, as
--   other admissions settling them do.
-- - A row under a lock file of another host (flock, lockfile) does not count: its slots are that
--   host's own files, so the two cannot share a slot.
-- - A row of this host counts here: its wrapper is the caller's to check (isGone), with the
--   row's wrapper_start, lock_backend and lock_key, which the answer carries.
-- - A row under a Redis lock (or none recorded) counts: this log cannot ask Redis.
CREATE FUNCTION {{schema}}.slot_disagreement(p jsonb) RETURNS jsonb LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
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
BEGIN
  SELECT max(m.version) INTO version FROM {{schema}}.schema_migrations m;
  IF p ? 'key' THEN
    IF NOT pg_try_advisory_lock((p->>'key')::bigint) THEN
      -- The holder read for the skip is a running copy given another N if there is one that
      -- may still run (slot_disagreement()): such a copy is refused even while every slot it
      -- would take is held.
      SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at, coalesce(max_running, 1) AS max_running FROM {{schema}}.runs
        WHERE job = job_name AND status = 'running' ORDER BY coalesce(max_running, 1) <> slot_count DESC, id DESC LIMIT 1) r;
      IF (holder->>'max_running')::integer <> slot_count THEN
        disagrees := {{schema}}.slot_disagreement(p);
        IF disagrees IS NOT NULL THEN
          RETURN jsonb_build_object('admitted', false, 'reason', 'slots', 'holder', disagrees - 'max_running',
                                    'max_running', disagrees->'max_running', 'version', version);
        END IF;
        SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at FROM {{schema}}.runs
          WHERE job = job_name AND status = 'running' ORDER BY coalesce(max_running, 1) = slot_count DESC, id DESC LIMIT 1) r;
      END IF;
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
    ticked := FOUND;
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

  new_id := nextval(pg_get_serial_sequence('{{schema}}.runs', 'id'));
  INSERT INTO {{schema}}.runs (id, status, job, host, trigger, attempt, pid, username, command, started_at, tick,
                               lock_backend, lock_key, run_key, invoked_at, wrapper_start, request_id, slot, max_running)
  VALUES (new_id, 'running', job_name, host_name,
          CASE WHEN cardinality(claimed_id) > 0 THEN 'request' ELSE p->>'trigger' END,
          (p->>'attempt')::integer, (p->>'pid')::integer, p->>'username', p->>'command', started, tick_at,
          p->>'lock_backend', p->>'lock_key', p->>'run_key', (p->>'invoked_at')::timestamptz, p->>'wrapper_start',
          claimed_id[1], (p->>'slot')::integer, slot_count);
  UPDATE {{schema}}.requests SET status = 'running', claimed_at = now(), attempts = attempts + 1, run_id = new_id
  WHERE id = ANY(claimed_id);
  UPDATE {{schema}}.jobs SET command = p->>'command', host = host_name, min_interval_ms = (p->>'min_interval_ms')::bigint,
         last_seen_at = started
  WHERE name = job_name;
  RETURN jsonb_build_object('admitted', true, 'id', new_id, 'requests', claimed, 'running', others, 'version', version);
END $$;

CREATE OR REPLACE FUNCTION {{schema}}.admit_lease(p jsonb) RETURNS jsonb LANGUAGE plpgsql SET lock_timeout = '5s' AS $$
DECLARE
  lease      bigint  := (p->>'lease')::bigint;
  taken      bigint;
  holder     jsonb;
  slot_count integer := coalesce((p->>'max_running')::integer, 1);
  disagrees  jsonb;
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
    -- As admit() does when the advisory lock is held: a running copy given another N first.
    SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at, coalesce(max_running, 1) AS max_running FROM {{schema}}.runs
      WHERE job = p->>'job' AND status = 'running' ORDER BY coalesce(max_running, 1) <> slot_count DESC, id DESC LIMIT 1) r;
    IF (holder->>'max_running')::integer <> slot_count THEN
      disagrees := {{schema}}.slot_disagreement(p);
      IF disagrees IS NOT NULL THEN
        RETURN jsonb_build_object('r', jsonb_build_object('admitted', false, 'reason', 'slots', 'holder', disagrees - 'max_running',
                                  'max_running', disagrees->'max_running',
                                  'version', (SELECT max(m.version) FROM {{schema}}.schema_migrations m)));
      END IF;
      SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at FROM {{schema}}.runs
        WHERE job = p->>'job' AND status = 'running' ORDER BY coalesce(max_running, 1) = slot_count DESC, id DESC LIMIT 1) r;
    END IF;
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
