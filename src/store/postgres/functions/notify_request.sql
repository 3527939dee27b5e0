-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.notify_request() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  PERFORM pg_notify('cronguard_requests', TG_TABLE_SCHEMA || ':' || NEW.job);
  RETURN NULL;
END $$;
