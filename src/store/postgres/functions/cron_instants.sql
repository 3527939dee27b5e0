-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.cron_instants(local timestamp without time zone, fixed boolean) RETURNS timestamp with time zone[] LANGUAGE plpgsql STABLE AS $$
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
