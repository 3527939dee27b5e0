-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.cron_values(field text, lo integer, hi integer, names text[]) RETURNS integer[] LANGUAGE plpgsql IMMUTABLE AS $$
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
