-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.schedule_field_problem(field text, what text, lo integer, hi integer, names text[]) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
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
