-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.cron_problem(expr text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  fields text[] := string_to_array(expr, ' ');
BEGIN
  IF cardinality(fields) <> 5 THEN
    RETURN format('has %s field%s', cardinality(fields), CASE WHEN cardinality(fields) = 1 THEN '' ELSE 's' END);
  END IF;
  RETURN coalesce({{schema}}.schedule_field_problem(fields[1], 'minute', 0, 59, NULL),
                  {{schema}}.schedule_field_problem(fields[2], 'hour', 0, 23, NULL),
                  {{schema}}.schedule_field_problem(fields[3], 'day', 1, 31, NULL),
                  {{schema}}.schedule_field_problem(fields[4], 'month', 1, 12,
                    ARRAY['jan','feb','mar','apr','may','jun','jul','aug','sep','oct','nov','dec']),
                  {{schema}}.schedule_field_problem(fields[5], 'weekday', 0, 7, ARRAY['sun','mon','tue','wed','thu','fri','sat']));
END $$;
