-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.count_skip(job_name text, run bigint) RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF run IS NOT NULL THEN
    UPDATE {{schema}}.runs SET "overlaps" = "overlaps" + 1 WHERE id = run;
    IF FOUND THEN RETURN; END IF;
  END IF;
  INSERT INTO {{schema}}.jobs (name, pending_overlaps) VALUES (job_name, 1)
  ON CONFLICT (name) DO UPDATE SET pending_overlaps = {{schema}}.jobs.pending_overlaps + 1;
END $$;
