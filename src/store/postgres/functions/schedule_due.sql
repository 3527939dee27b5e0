-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.schedule_due(spec text, zone text, last_start timestamp with time zone, at timestamp with time zone, early boolean DEFAULT true) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  ms numeric;
  expr text := spec;
  zoned boolean := spec ~ '^TZ=\S+ ';
  problem text;
  fire timestamptz;
  slack interval;
  tries int := 0;
  ahead interval := CASE WHEN early THEN interval '30.001 seconds' ELSE interval '0.001 seconds' END;
BEGIN
  IF spec ~ '^every ' THEN
    ms := {{schema}}.schedule_every_ms(substr(spec, 7));
    IF ms IS NULL OR ms < 1000 THEN RETURN jsonb_build_object('problem', format('its stored schedule: ''%s'' is not valid', spec)); END IF;
    RETURN jsonb_build_object('due', last_start IS NULL
      OR at >= last_start + make_interval(secs => (ms - CASE WHEN early THEN least(ms / 10, 30000) ELSE 0 END) / 1000));
  END IF;
  IF zoned THEN
    zone := substring(spec FROM '^TZ=(\S+) ');
    expr := substring(spec FROM '^\S+ (.*)$');
  END IF;
  problem := {{schema}}.cron_problem(expr);
  IF problem IS NOT NULL THEN RETURN jsonb_build_object('problem', format('its stored schedule: ''%s'' %s', expr, problem)); END IF;
  BEGIN
    fire := {{schema}}.cron_fire(expr, zone, at + ahead);
    WHILE fire IS NOT NULL AND tries < 2 LOOP
      slack := coalesce(least((fire - {{schema}}.cron_fire(expr, zone, fire)) / 10, interval '30 seconds'), interval '30 seconds');
      EXIT WHEN fire <= at + CASE WHEN early THEN slack ELSE interval '0' END;
      fire := {{schema}}.cron_fire(expr, zone, fire);
      tries := tries + 1;
    END LOOP;
    -- None in the 28 years before, nor in the 28 to come: 31 February, stored by hand.
    IF fire IS NULL AND {{schema}}.cron_fire(expr, zone, at + interval '28 years') IS NULL THEN
      RETURN jsonb_build_object('problem', format('its stored schedule: ''%s'' never fires', expr));
    END IF;
  EXCEPTION WHEN invalid_parameter_value THEN
    RETURN jsonb_build_object('problem', CASE WHEN zoned THEN format('its stored schedule: unknown time zone ''%s''', zone)
      ELSE format('this host''s time zone, %s, is unknown to PostgreSQL: give the schedule one (TZ=ZONE)', zone) END);
  END;
  RETURN jsonb_build_object('due', fire IS NOT NULL AND tries < 2 AND (last_start IS NULL OR fire > last_start + slack));
END $$;
