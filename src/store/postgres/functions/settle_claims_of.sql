-- What a schema migrated to the newest version defines (see test/store/postgres-functions.test.ts).

CREATE OR REPLACE FUNCTION {{schema}}.settle_claims_of(ids bigint[]) RETURNS void LANGUAGE sql VOLATILE SET lock_timeout = '5s' AS $$
  UPDATE {{schema}}.requests q SET status = 'pending', run_id = NULL, claimed_at = NULL, attempts = greatest(q.attempts - 1, 0)
  FROM {{schema}}.runs r
  WHERE q.run_id = ANY(ids) AND q.status = 'running' AND r.id = q.run_id AND r.status <> 'running' AND r.child_pid IS NULL;
  UPDATE {{schema}}.requests q SET status = 'failed', finished_at = now(), exit_code = r.exit_code,
         error = 'run ' || r.id || ' ended without its last attempt: its wrapper vanished before it could retry or record the end'
  FROM {{schema}}.runs r
  WHERE q.run_id = ANY(ids) AND q.status = 'running' AND r.id = q.run_id AND r.status <> 'running';
$$;
