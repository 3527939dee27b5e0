-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.count_run() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO {{schema}}.jobs (name) VALUES (NEW.job) ON CONFLICT (name) DO NOTHING;
  ELSIF OLD.status <> 'running' THEN
    -- A spooled outcome overwriting a row another host had marked abandoned.
    UPDATE {{schema}}.run_counts SET n = n - 1 WHERE job = OLD.job AND status = OLD.status;
  END IF;
  IF NEW.status <> 'running' THEN
    INSERT INTO {{schema}}.run_counts AS c (job, status, n) VALUES (NEW.job, NEW.status, 1)
    ON CONFLICT (job, status) DO UPDATE SET n = c.n + 1;
  END IF;
  RETURN NULL;
END $$;
