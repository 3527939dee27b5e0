-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.locked_refusal(p jsonb, version integer) RETURNS jsonb LANGUAGE plpgsql VOLATILE SET lock_timeout = '5s' AS $$
DECLARE
  slot_count integer := coalesce((p->>'max_running')::integer, 1);
  holder     jsonb;
  disagrees  jsonb;
BEGIN
  SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at, coalesce(max_running, 1) AS max_running FROM {{schema}}.runs
    WHERE job = p->>'job' AND status = 'running' ORDER BY coalesce(max_running, 1) <> slot_count DESC, id DESC LIMIT 1) r;
  IF (holder->>'max_running')::integer <> slot_count THEN
    disagrees := {{schema}}.slot_disagreement(p);
    IF disagrees IS NOT NULL THEN
      RETURN jsonb_build_object('admitted', false, 'reason', 'slots', 'holder', disagrees - 'max_running',
                                'max_running', disagrees->'max_running', 'version', version);
    END IF;
    SELECT to_jsonb(r) INTO holder FROM (SELECT id, host, pid, started_at FROM {{schema}}.runs
      WHERE job = p->>'job' AND status = 'running' ORDER BY coalesce(max_running, 1) = slot_count DESC, id DESC LIMIT 1) r;
  END IF;
  IF (p->>'count_skip')::boolean THEN PERFORM {{schema}}.count_skip(p->>'job', (holder->>'id')::bigint); END IF;
  RETURN jsonb_build_object('admitted', false, 'reason', 'locked', 'holder', holder, 'version', version);
END $$;
