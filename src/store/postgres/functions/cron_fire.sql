-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.cron_fire(expr text, zone text, before timestamp with time zone) RETURNS timestamp with time zone LANGUAGE plpgsql STABLE SET TimeZone = 'UTC' AS $$
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
