-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.lease_key(job text) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT ('x' || left(encode(sha256(convert_to('cronguard:' || CASE WHEN n.nspname = 'cronguard' THEN '' ELSE n.nspname || ':' END
                                                || job, 'UTF8')), 'hex'), 16))::bit(64)::bigint
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.oid = pg_typeof(NULL::{{schema}}.leases);
$$;
