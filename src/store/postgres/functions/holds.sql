-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.holds(key bigint) RETURNS boolean LANGUAGE sql VOLATILE AS $$
  SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 1
                   AND classid = ((key >> 32) & 4294967295)::oid AND objid = (key & 4294967295)::oid);
$$;
