-- Reading a stored schedule (0017) in SQL, for --scheduled: the admission decides whether a
-- job is due in its own statement, with no round trip more, by the rules schedule/due.ts
-- applies with croner for the other stores (test/schedule/parity-postgres.test.ts holds
-- the two to the same answers, across DST changes).

-- When a run of --scheduled last said that its job has no schedule it can read: once a day.
ALTER TABLE {{schema}}.jobs ADD COLUMN unscheduled_said_at timestamptz;

-- The values a cron field allows (weekday 7 is 0, Sunday), for a field 0017's
-- schedule_field_problem() accepts.
CREATE FUNCTION {{schema}}.cron_values(field text, lo int, hi int, names text[]) RETURNS int[] LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  item text;
  m text[];
  a int;
  b int;
  step int;
  out int[] := '{}';
BEGIN
  FOREACH item IN ARRAY string_to_array(lower(field), ',') LOOP
    m := regexp_match(item, '^(\*|[0-9]+|[a-z]{3})(?:-([0-9]+|[a-z]{3}))?(?:/([0-9]+))?$');
    a := CASE WHEN m[1] = '*' THEN lo WHEN m[1] ~ '^[0-9]' THEN m[1]::int ELSE array_position(names, m[1]) - 1 + lo END;
    b := CASE WHEN m[1] = '*' THEN hi WHEN m[2] IS NULL THEN a WHEN m[2] ~ '^[0-9]' THEN m[2]::int
              ELSE array_position(names, m[2]) - 1 + lo END;
    step := coalesce(m[3]::int, 1);
    out := out || ARRAY(SELECT CASE WHEN hi = 7 AND v = 7 THEN 0 ELSE v END FROM generate_series(a, b, step) v);
  END LOOP;
  RETURN out;
END $$;

-- The instants a local time stands for in the session's TimeZone (cron_fire sets it), as
-- cron (and croner, with its fixedTimeRule 'no-wildcard') reads them. A time that comes twice (the hour repeated when
-- clocks go back) is its first for a job at a fixed time (`fixed`: no * or / in minute and
-- hour), both for the others; a time that never comes (skipped when clocks go forward) is
-- the moment of the change for a fixed-time job, when cron runs what it skipped, and none
-- for the others.
CREATE FUNCTION {{schema}}.cron_instants(local timestamp, fixed boolean) RETURNS timestamptz[] LANGUAGE plpgsql STABLE AS $$
DECLARE
  u timestamptz := local AT TIME ZONE 'UTC';
  -- The instants `local` is under the offsets of a day before and a day after.
  a timestamptz := u - ((u - interval '1 day')::timestamp - ((u - interval '1 day') AT TIME ZONE 'UTC'));
  b timestamptz := u - ((u + interval '1 day')::timestamp - ((u + interval '1 day') AT TIME ZONE 'UTC'));
  found timestamptz[] := ARRAY(SELECT DISTINCT t FROM unnest(ARRAY[a, b]) t WHERE t::timestamp = local ORDER BY t);
  t timestamptz;
BEGIN
  IF cardinality(found) > 0 THEN RETURN CASE WHEN fixed THEN found[1:1] ELSE found END; END IF;
  IF NOT fixed THEN RETURN '{}'; END IF;
  -- Skipped: the first minute whose local time is not before it.
  t := least(a, b);
  WHILE t::timestamp < local AND t < greatest(a, b) LOOP
    t := t + interval '1 minute';
  END LOOP;
  RETURN ARRAY[t];
END $$;

-- The latest time before `before` at which the five-field expression `expr` fires in
-- `zone`; NULL when none in the 28 years before (a 29 February on a given weekday recurs
-- within them). Local times are read under the session's TimeZone set to `zone` for the
-- call: AT TIME ZONE would take CET, EET, MET or WET for a fixed abbreviation, without the
-- summer time their zones have (and croner reads). A zone PostgreSQL does not know is 22023.
CREATE FUNCTION {{schema}}.cron_fire(expr text, zone text, before timestamptz) RETURNS timestamptz LANGUAGE plpgsql STABLE
SET TimeZone = 'UTC' AS $$
DECLARE
  f text[] := string_to_array(expr, ' ');
  minutes int[] := ARRAY(SELECT DISTINCT v FROM unnest({{schema}}.cron_values(f[1], 0, 59, NULL)) v ORDER BY v DESC);
  hours int[] := ARRAY(SELECT DISTINCT v FROM unnest({{schema}}.cron_values(f[2], 0, 23, NULL)) v ORDER BY v DESC);
  doms int[] := {{schema}}.cron_values(f[3], 1, 31, NULL);
  months int[] := {{schema}}.cron_values(f[4], 1, 12, ARRAY['jan','feb','mar','apr','may','jun','jul','aug','sep','oct','nov','dec']);
  dows int[] := {{schema}}.cron_values(f[5], 0, 7, ARRAY['sun','mon','tue','wed','thu','fri','sat']);
  -- Vixie cron: day of month AND day of week when either starts with *, else either.
  dom_and_dow boolean := f[3] LIKE '*%' OR f[5] LIKE '*%';
  fixed boolean := f[1] !~ '[*/]' AND f[2] !~ '[*/]';
  -- Clocks going back repeat local times: a candidate may read up to that much later than
  -- `before` does, and one that reads that much earlier than the first found may come later.
  back interval;
  top timestamp;
  day date;
  local timestamp;
  dom_ok boolean;
  dow_ok boolean;
  h int;
  m int;
  t timestamptz;
  best timestamptz;
  best_local timestamp;
BEGIN
  PERFORM set_config('TimeZone', zone, true);
  back := greatest(interval '0',
    ((before - interval '1 day')::timestamp - ((before - interval '1 day') AT TIME ZONE 'UTC'))
    - ((before + interval '1 day')::timestamp - ((before + interval '1 day') AT TIME ZONE 'UTC')));
  top := date_trunc('minute', before::timestamp + back);
  day := top::date;
  WHILE day > top::date - 366 * 28 LOOP
    IF NOT extract(month FROM day)::int = ANY(months) THEN
      day := date_trunc('month', day)::date - 1;
      CONTINUE;
    END IF;
    dom_ok := extract(day FROM day)::int = ANY(doms);
    dow_ok := extract(dow FROM day)::int = ANY(dows);
    IF (dom_ok AND dow_ok) OR (NOT dom_and_dow AND (dom_ok OR dow_ok)) THEN
      FOREACH h IN ARRAY hours LOOP
        CONTINUE WHEN day = top::date AND h > extract(hour FROM top);
        FOREACH m IN ARRAY minutes LOOP
          local := day + make_time(h, m, 0);
          CONTINUE WHEN local > top;
          IF best IS NOT NULL AND local < best_local - back THEN RETURN best; END IF;
          FOREACH t IN ARRAY {{schema}}.cron_instants(local, fixed) LOOP
            IF t < before AND (best IS NULL OR t > best) THEN
              best := t;
              best_local := coalesce(best_local, local);
            END IF;
          END LOOP;
          IF best IS NOT NULL AND back = interval '0' THEN RETURN best; END IF;
        END LOOP;
      END LOOP;
    END IF;
    day := day - 1;
  END LOOP;
  RETURN best;
END $$;

-- Milliseconds of `every`'s duration as 0017's set_schedule() reads it.
CREATE FUNCTION {{schema}}.schedule_every_ms(d text) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$
  SELECT round(CASE WHEN d ~ '^[0-9.]+$' THEN d::numeric * 1000
               ELSE (SELECT sum(p[1]::numeric * CASE p[2] WHEN 'ms' THEN 1 WHEN 's' THEN 1000 WHEN 'm' THEN 60000 WHEN 'h' THEN 3600000 ELSE 86400000 END)
                     FROM regexp_matches(d, '([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)', 'g') AS p) END);
$$;

-- Whether a job with schedule `spec` (read in `zone` without TZ=) and its last start is due
-- `at`, as scheduleDue() in schedule/due.ts: {"due": bool}, or {"problem": why} when the
-- stored schedule cannot be read. A fire time counts as come a slack before it (`early`: an
-- invocation's first admission, for cron's jitter; not a loop's later ones), and a start
-- that late after it still counts as its run: a tenth of the time since the fire before
-- it, at most 30 s.
CREATE FUNCTION {{schema}}.schedule_due(spec text, zone text, last_start timestamptz, at timestamptz, early boolean DEFAULT true)
RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
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

-- Sets (or, with NULL or '', clears) a job's schedule, checked as `cronguard schedule`
-- checks it: `every 15m`, `0 3 * * 1-5`, `TZ=Europe/Warsaw 0 3 * * *`, `@daily`. Returns
-- the schedule as stored; a mistake raises 22023 with what is wrong.
CREATE FUNCTION {{schema}}.set_schedule(job text, spec text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  -- Blanks as cron reads them (and schedule/spec.ts): spaces and tabs, line ends around.
  s text := regexp_replace(btrim(coalesce(spec, ''), E' \t\r\n'), E'[ \t\r\n]+', ' ', 'g');
  zone text;
  problem text;
  ms numeric;
  shown text := 'five fields: minute hour day-of-month month day-of-week, e.g. "0 3 * * 1-5"';
BEGIN
  IF job IS NULL OR job !~ '^[A-Za-z0-9_][A-Za-z0-9_.:@+-]{0,99}$' OR job ~ '^[0-9]+$' THEN
    RAISE EXCEPTION 'set_schedule: invalid job name %', quote_literal(job) USING ERRCODE = '22023';
  END IF;
  IF s = '' THEN
    UPDATE {{schema}}.jobs SET schedule = NULL WHERE name = job;
    RETURN NULL;
  END IF;
  IF length(s) > 200 THEN RAISE EXCEPTION 'schedule: at most 200 characters' USING ERRCODE = '22023'; END IF;
  IF s ~* '^every ' THEN
    s := 'every ' || substr(s, 7);
    IF s !~ '^every (([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+|[0-9]+(\.[0-9]+)?)$' THEN
      RAISE EXCEPTION 'schedule: every: invalid duration ''%'' (use e.g. 500ms, 10s, 5m, 2h, 1d, 1h30m or a number of seconds)', substr(s, 7) USING ERRCODE = '22023';
    END IF;
    SELECT round(CASE WHEN substr(s, 7) ~ '^[0-9.]+$' THEN substr(s, 7)::numeric * 1000
                ELSE (SELECT sum(p[1]::numeric * CASE p[2] WHEN 'ms' THEN 1 WHEN 's' THEN 1000 WHEN 'm' THEN 60000 WHEN 'h' THEN 3600000 ELSE 86400000 END)
                      FROM regexp_matches(substr(s, 7), '([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)', 'g') AS p) END) INTO ms;
    IF ms < 1000 THEN RAISE EXCEPTION 'schedule: every: % is shorter than 1s', substr(s, 7) USING ERRCODE = '22023'; END IF;
    IF ms > 3650 * 86400000::numeric THEN RAISE EXCEPTION 'schedule: every: ''%'' is longer than 3650d', substr(s, 7) USING ERRCODE = '22023'; END IF;
  ELSE
    IF s ~ '^(CRON_)?TZ=\S+ ' THEN
      zone := substring(s FROM '^(?:CRON_)?TZ=(\S+) ');
      s := substring(s FROM '^\S+ (.*)$');
      -- Kept as given (as the CLI keeps it); the names only PostgreSQL's tz files have are refused,
      -- since cronguard reads schedules through Node's Intl, which does not know them.
      IF NOT EXISTS (SELECT FROM pg_timezone_names WHERE lower(name) = lower(zone)
                     AND name !~ '^(posix|right)/' AND name NOT IN ('Factory', 'localtime', 'posixrules')) THEN
        RAISE EXCEPTION 'schedule: unknown time zone ''%'' (an IANA name, e.g. Europe/Warsaw, America/New_York or UTC)',
          substring(spec FROM 'TZ=(\S+)') USING ERRCODE = '22023';
      END IF;
    END IF;
    s := coalesce((SELECT m.expr FROM (VALUES ('@yearly', '0 0 1 1 *'), ('@annually', '0 0 1 1 *'), ('@monthly', '0 0 1 * *'),
                   ('@weekly', '0 0 * * 0'), ('@daily', '0 0 * * *'), ('@midnight', '0 0 * * *'), ('@hourly', '0 * * * *')) AS m(name, expr)
                   WHERE m.name = lower(s)), s);
    problem := {{schema}}.cron_problem(s);
    IF problem IS NOT NULL THEN RAISE EXCEPTION 'schedule: ''%'' % (%)', s, problem, shown USING ERRCODE = '22023'; END IF;
    -- 31 February and its kin: never due, it would read as a job that waits.
    IF {{schema}}.cron_fire(s, coalesce(zone, 'UTC'), now() + interval '28 years') IS NULL THEN
      RAISE EXCEPTION 'schedule: ''%'' never fires (%)', s, shown USING ERRCODE = '22023';
    END IF;
    IF zone IS NOT NULL THEN s := 'TZ=' || zone || ' ' || s; END IF;
  END IF;
  INSERT INTO {{schema}}.jobs AS j (name, schedule) VALUES (job, s)
  ON CONFLICT (name) DO UPDATE SET schedule = excluded.schedule;
  RETURN s;
END $$;
