-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.due_after_ms(ms numeric) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$
  SELECT ms - least(ms / 10, CASE WHEN ms < 60000 THEN 250 ELSE 30000 END);
$$;
