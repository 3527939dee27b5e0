-- A job's schedule (`cronguard schedule`, `--scheduled`): `every DURATION`, or a five-field
-- cron expression with an optional `TZ=ZONE ` before it, as cronguard spells it. An UPDATE by
-- hand is held to that shape here (one space between parts, the characters cron fields
-- use); the values (minute 61, a zone nobody knows) are cronguard's to check, and a run that
-- cannot read its schedule says so and does not run.
ALTER TABLE jobs ADD COLUMN schedule TEXT CHECK (schedule IS NULL OR (
  length(schedule) BETWEEN 7 AND 200
  AND schedule NOT GLOB '*  *' AND schedule NOT GLOB ' *' AND schedule NOT GLOB '* '
  AND (
    (schedule GLOB 'every [0-9]*' AND substr(schedule, 7) NOT GLOB '*[^0-9.smhd]*')
    OR (schedule NOT GLOB '*[^0-9A-Za-z*,/ -]*'
        AND length(schedule) - length(replace(schedule, ' ', '')) = 4)
    OR (schedule GLOB 'TZ=?* *'
        AND substr(schedule, instr(schedule, ' ') + 1) NOT GLOB '*[^0-9A-Za-z*,/ -]*'
        AND length(schedule) - length(replace(schedule, ' ', '')) = 5))));
