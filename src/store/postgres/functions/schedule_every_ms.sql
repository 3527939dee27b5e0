-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.schedule_every_ms(d text) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$
  SELECT round(CASE WHEN d ~ '^[0-9.]+$' THEN d::numeric * 1000
               ELSE (SELECT sum(p[1]::numeric * CASE p[2] WHEN 'ms' THEN 1 WHEN 's' THEN 1000 WHEN 'm' THEN 60000 WHEN 'h' THEN 3600000 ELSE 86400000 END)
                     FROM regexp_matches(d, '([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)', 'g') AS p) END);
$$;
