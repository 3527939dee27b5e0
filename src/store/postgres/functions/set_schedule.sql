-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.set_schedule(job text, spec text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
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
