-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

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
