-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.request(job text, args text[] DEFAULT '{}'::text[], at timestamp with time zone DEFAULT now(), requested_by text DEFAULT NULL::text) RETURNS bigint LANGUAGE sql VOLATILE AS $$
  INSERT INTO {{schema}}.requests (job, args, not_before, requested_by)
  VALUES ($1, coalesce($2, '{}'), coalesce($3, now()), $4) RETURNING id
$$;
