-- A job's schedule (issue 24, as PostgreSQL's migration 0017): `every DURATION`, or a
-- five-field cron expression with an optional `TZ=ZONE ` before it, as cronguard spells it.
-- A documented UPDATE by hand is held to that shape by the CHECK (enforced by MariaDB 10.2
-- and MySQL 8.0.16 on); the values are cronguard's to check, and a run that cannot read its
-- schedule says so and does not run. No trigger or routine, as 0001: a least-privilege owner
-- migrates under binary logging. One statement: run again after a crash that came before its
-- step was recorded, it finds the column there (1060), which the migrator takes as done.
ALTER TABLE {{db}}.jobs ADD COLUMN schedule VARCHAR(200) NULL,
  ADD CONSTRAINT jobs_schedule_shape CHECK (schedule IS NULL OR (
    CHAR_LENGTH(schedule) <= 200
    AND schedule REGEXP '^(every ([0-9]+(\\.[0-9]+)?(ms|s|m|h|d))+|every [0-9]+(\\.[0-9]+)?|(TZ=[^ ]+ )?[0-9A-Za-z*,/-]+( [0-9A-Za-z*,/-]+){4})$'));
