-- A job's schedule (issue 24, `cronguard schedule`, `--scheduled`): `every DURATION`, or a
-- five-field cron expression with an optional `TZ=ZONE ` before it, stored as cronguard
-- spells it. The command stays in crontab; only when it runs is data. The column holds any
-- UPDATE to that shape; set_schedule() is the way to write it from SQL, checking every value.
ALTER TABLE {{schema}}.jobs ADD COLUMN schedule text CONSTRAINT jobs_schedule_shape CHECK (schedule IS NULL OR (
  length(schedule) <= 200
  AND schedule ~ '^(every ([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+|every [0-9]+(\.[0-9]+)?|(TZ=\S+ )?[0-9A-Za-z*,/-]+( [0-9A-Za-z*,/-]+){4})$'));

-- Why a cron field is not one cronguard reads, or NULL when it is: a list of `*`, a value
-- or a range (numbers, or 3-letter names where `names` has them), each with an optional
-- step; values within lo..hi.
CREATE FUNCTION {{schema}}.schedule_field_problem(field text, what text, lo int, hi int, names text[])
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  item text;
  m text[];
  v int;
  bounds int[];
BEGIN
  FOREACH item IN ARRAY string_to_array(field, ',') LOOP
    m := regexp_match(lower(item), '^(\*|[0-9]+|[a-z]{3})(?:-([0-9]+|[a-z]{3}))?(?:/([0-9]+))?$');
    IF m IS NULL THEN RETURN format('has a field cronguard does not read, ''%s''', field); END IF;
    IF m[3] IS NOT NULL AND m[3]::numeric < 1 THEN RETURN format('is not valid: a step of %s', m[3]); END IF;
    IF m[3] IS NOT NULL AND (length(m[3]) > 4 OR m[3]::int > hi) THEN RETURN format('is not valid: a step of %s is more than %s', m[3], hi); END IF;
    IF m[1] = '*' AND m[2] IS NOT NULL THEN RETURN format('has a field cronguard does not read, ''%s''', field); END IF;
    IF m[3] IS NOT NULL AND m[1] <> '*' AND m[2] IS NULL THEN
      RETURN format('is not valid: a step needs a range or * before it (%s-%s/%s, not %s)', m[1], hi, m[3], item);
    END IF;
    bounds := ARRAY[]::int[];
    FOREACH item IN ARRAY ARRAY[m[1], m[2]] LOOP
      CONTINUE WHEN item IS NULL OR item = '*';
      IF item ~ '^[0-9]+$' THEN
        v := CASE WHEN length(item) > 4 THEN 99999 ELSE item::int END;
      ELSE
        v := array_position(names, item) - 1 + lo;
      END IF;
      IF v IS NULL OR v < lo OR v > hi THEN RETURN format('is not valid: %s %s is outside %s-%s', what, item, lo, hi); END IF;
      bounds := bounds || v;
    END LOOP;
    IF cardinality(bounds) = 2 AND bounds[1] > bounds[2] THEN
      RETURN format('is not valid: %s range %s-%s runs backwards', what, m[1], m[2]);
    END IF;
  END LOOP;
  RETURN NULL;
END $$;

-- Sets (or, with NULL or '', clears) a job's schedule, checked as `cronguard schedule`
-- checks it: `every 15m`, `0 3 * * 1-5`, `TZ=Europe/Warsaw 0 3 * * *`, `@daily`. Returns
-- the schedule as stored; a mistake raises 22023 with what is wrong.
CREATE FUNCTION {{schema}}.set_schedule(job text, spec text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  -- Blanks as cron reads them (and schedule/spec.ts): spaces and tabs, line ends around.
  s text := regexp_replace(btrim(coalesce(spec, ''), E' \t\r\n'), E'[ \t\r\n]+', ' ', 'g');
  zone text;
  fields text[];
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
    fields := string_to_array(s, ' ');
    IF cardinality(fields) <> 5 THEN
      RAISE EXCEPTION 'schedule: ''%'' has % field% (%)', s, cardinality(fields), CASE WHEN cardinality(fields) = 1 THEN '' ELSE 's' END, shown USING ERRCODE = '22023';
    END IF;
    problem := coalesce({{schema}}.schedule_field_problem(fields[1], 'minute', 0, 59, NULL),
                        {{schema}}.schedule_field_problem(fields[2], 'hour', 0, 23, NULL),
                        {{schema}}.schedule_field_problem(fields[3], 'day', 1, 31, NULL),
                        {{schema}}.schedule_field_problem(fields[4], 'month', 1, 12,
                          ARRAY['jan','feb','mar','apr','may','jun','jul','aug','sep','oct','nov','dec']),
                        {{schema}}.schedule_field_problem(fields[5], 'weekday', 0, 7, ARRAY['sun','mon','tue','wed','thu','fri','sat']));
    IF problem IS NOT NULL THEN RAISE EXCEPTION 'schedule: ''%'' % (%)', s, problem, shown USING ERRCODE = '22023'; END IF;
    IF zone IS NOT NULL THEN s := 'TZ=' || zone || ' ' || s; END IF;
  END IF;
  INSERT INTO {{schema}}.jobs AS j (name, schedule) VALUES (job, s)
  ON CONFLICT (name) DO UPDATE SET schedule = excluded.schedule;
  RETURN s;
END $$;
