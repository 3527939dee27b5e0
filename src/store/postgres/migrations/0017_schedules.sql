-- A job's schedule (issue 24, `cronguard schedule`, `--scheduled`): `every DURATION`, or a
-- five-field cron expression with an optional `TZ=ZONE ` before it, stored as cronguard
-- spells it. The command stays in crontab; only when it runs is data. The column holds any
-- UPDATE to that shape; set_schedule() (0018, beside the cron reader it uses) is the way to
-- write it from SQL, checking every value.
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

-- Why a five-field cron expression is not one cronguard reads (how many fields it has, or
-- its first field's problem); NULL when it is.
CREATE FUNCTION {{schema}}.cron_problem(expr text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
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
