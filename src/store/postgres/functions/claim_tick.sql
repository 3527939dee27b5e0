-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.claim_tick(p jsonb, slot_count integer) RETURNS boolean LANGUAGE plpgsql VOLATILE SET lock_timeout = '5s' AS $$
DECLARE
  job_name  text        := p->>'job';
  host_name text        := p->>'host';
  tick_at   timestamptz := (p->>'tick')::timestamptz;
  ahead     timestamptz := (p->>'now')::timestamptz + interval '1 minute';
BEGIN
  FOR i IN 1 .. slot_count - 1 LOOP
    INSERT INTO {{schema}}.slot_ticks AS t (job, slot, tick, tick_host) VALUES (job_name, i, tick_at, host_name)
    ON CONFLICT (job, slot) DO UPDATE
    SET tick = CASE WHEN t.tick > ahead THEN excluded.tick ELSE greatest(t.tick, excluded.tick) END, tick_host = excluded.tick_host
    WHERE excluded.tick > t.tick OR t.tick_host = excluded.tick_host OR t.tick > ahead
       OR NOT EXISTS (SELECT 1 FROM {{schema}}.runs r WHERE r.job = job_name AND r.tick = t.tick AND r.host = t.tick_host
                      AND (r.status = 'running' OR r.child_pid IS NOT NULL));
    IF FOUND THEN RETURN true; END IF;
  END LOOP;
  RETURN false;
END $$;
