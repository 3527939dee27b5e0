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

-- The instants a local time of `zone` stands for, as cron (and croner, with its
-- fixedTimeRule 'no-wildcard') reads them. A time that comes twice (the hour repeated when
-- clocks go back) is its first for a job at a fixed time (`fixed`: no * or / in minute and
-- hour), both for the others; a time that never comes (skipped when clocks go forward) is
-- the moment of the change for a fixed-time job, when cron runs what it skipped, and none
-- for the others.
CREATE FUNCTION {{schema}}.cron_instants(local timestamp, zone text, fixed boolean) RETURNS timestamptz[] LANGUAGE plpgsql STABLE AS $$
DECLARE
  u timestamptz := local AT TIME ZONE 'UTC';
  -- The instants `local` is under the offsets of a day before and a day after.
  a timestamptz := u - (((u - interval '1 day') AT TIME ZONE zone) - ((u - interval '1 day') AT TIME ZONE 'UTC'));
  b timestamptz := u - (((u + interval '1 day') AT TIME ZONE zone) - ((u + interval '1 day') AT TIME ZONE 'UTC'));
  found timestamptz[] := ARRAY(SELECT DISTINCT t FROM unnest(ARRAY[a, b]) t WHERE (t AT TIME ZONE zone) = local ORDER BY t);
  t timestamptz;
BEGIN
  IF cardinality(found) > 0 THEN RETURN CASE WHEN fixed THEN found[1:1] ELSE found END; END IF;
  IF NOT fixed THEN RETURN '{}'; END IF;
  -- Skipped: the first minute whose local time is not before it.
  t := least(a, b);
  WHILE (t AT TIME ZONE zone) < local AND t < greatest(a, b) LOOP
    t := t + interval '1 minute';
  END LOOP;
  RETURN ARRAY[t];
END $$;

-- The latest time before `before` at which the five-field expression `expr` fires in
-- `zone`; NULL when none in the 28 years before (a 29 February on a given weekday recurs
-- within them).
CREATE FUNCTION {{schema}}.cron_fire(expr text, zone text, before timestamptz) RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
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
  back interval := greatest(interval '0',
    (((before - interval '1 day') AT TIME ZONE zone) - ((before - interval '1 day') AT TIME ZONE 'UTC'))
    - (((before + interval '1 day') AT TIME ZONE zone) - ((before + interval '1 day') AT TIME ZONE 'UTC')));
  top timestamp := date_trunc('minute', (before AT TIME ZONE zone) + back);
  day date := top::date;
  local timestamp;
  dom_ok boolean;
  dow_ok boolean;
  h int;
  m int;
  t timestamptz;
  best timestamptz;
  best_local timestamp;
BEGIN
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
          FOREACH t IN ARRAY {{schema}}.cron_instants(local, zone, fixed) LOOP
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
-- stored schedule cannot be read. A fire time counts as come a slack before it (a tenth of
-- the time since the fire before it, at most 30 s: cron's jitter), and a start that late
-- after it still counts as its run.
CREATE FUNCTION {{schema}}.schedule_due(spec text, zone text, last_start timestamptz, at timestamptz) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
  ms numeric;
  expr text := spec;
  fields text[];
  problem text;
  fire timestamptz;
  slack interval;
  tries int := 0;
BEGIN
  IF spec ~ '^every ' THEN
    ms := {{schema}}.schedule_every_ms(substr(spec, 7));
    IF ms IS NULL OR ms < 1000 THEN RETURN jsonb_build_object('problem', format('its stored schedule: ''%s'' is not valid', spec)); END IF;
    RETURN jsonb_build_object('due', last_start IS NULL OR at >= last_start + make_interval(secs => (ms - least(ms / 10, 30000)) / 1000));
  END IF;
  IF spec ~ '^TZ=\S+ ' THEN
    zone := substring(spec FROM '^TZ=(\S+) ');
    expr := substring(spec FROM '^\S+ (.*)$');
  END IF;
  fields := string_to_array(expr, ' ');
  problem := coalesce({{schema}}.schedule_field_problem(fields[1], 'minute', 0, 59, NULL),
                      {{schema}}.schedule_field_problem(fields[2], 'hour', 0, 23, NULL),
                      {{schema}}.schedule_field_problem(fields[3], 'day', 1, 31, NULL),
                      {{schema}}.schedule_field_problem(fields[4], 'month', 1, 12,
                        ARRAY['jan','feb','mar','apr','may','jun','jul','aug','sep','oct','nov','dec']),
                      {{schema}}.schedule_field_problem(fields[5], 'weekday', 0, 7, ARRAY['sun','mon','tue','wed','thu','fri','sat']));
  IF cardinality(fields) <> 5 THEN problem := format('has %s fields', cardinality(fields)); END IF;
  IF problem IS NOT NULL THEN RETURN jsonb_build_object('problem', format('its stored schedule: ''%s'' %s', expr, problem)); END IF;
  BEGIN
    fire := {{schema}}.cron_fire(expr, zone, at + interval '30.001 seconds');
    WHILE fire IS NOT NULL AND tries < 2 LOOP
      slack := least((fire - {{schema}}.cron_fire(expr, zone, fire)) / 10, interval '30 seconds');
      slack := coalesce(slack, interval '30 seconds');
      EXIT WHEN fire <= at + slack;
      fire := {{schema}}.cron_fire(expr, zone, fire);
      tries := tries + 1;
    END LOOP;
  EXCEPTION WHEN invalid_parameter_value THEN
    RETURN jsonb_build_object('problem', format('its stored schedule: unknown time zone ''%s''', zone));
  END;
  RETURN jsonb_build_object('due', fire IS NOT NULL AND tries < 2 AND (last_start IS NULL OR fire > last_start + slack));
END $$;
