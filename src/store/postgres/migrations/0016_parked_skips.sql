-- finish() (0013) folds the skips parked on its job into its row and zeroes them. It read
-- the count from a self-join on the statement's snapshot: a skip parked after that snapshot
-- but before the update reached the row (count_skip, from a host that found no running row)
-- was zeroed by the update, counted nowhere (seen once in six hosts starting at once). The
-- count is now read under the row lock, FOR UPDATE, which waits for such a skip and reads
-- the row as it committed; what it read is what is zeroed.
CREATE OR REPLACE FUNCTION {{schema}}.finish(p jsonb) RETURNS boolean LANGUAGE sql SET lock_timeout = '5s' AS $$
  WITH claimed AS (UPDATE {{schema}}.jobs j SET pending_overlaps = 0
                   FROM (SELECT name, pending_overlaps FROM {{schema}}.jobs
                         WHERE name = (SELECT job FROM {{schema}}.runs WHERE id = (p->>'id')::bigint)
                         FOR UPDATE) old
                   WHERE j.name = old.name AND old.pending_overlaps > 0
                   RETURNING old.pending_overlaps AS n),
       done AS (UPDATE {{schema}}.runs SET status = p->>'status', finished_at = (p->>'finished_at')::timestamptz,
                       duration_ms = (p->>'duration_ms')::bigint, exit_code = (p->>'exit_code')::integer, signal = p->>'signal',
                       output = p->>'output', output_truncated = (p->>'output_truncated')::boolean, error = p->>'error',
                       "overlaps" = "overlaps" + coalesce((SELECT n FROM claimed), 0)
                WHERE id = (p->>'id')::bigint RETURNING id),
       ended AS (UPDATE {{schema}}.requests SET status = p->>'request_status', finished_at = (p->>'finished_at')::timestamptz,
                        exit_code = (p->>'exit_code')::integer
                 WHERE run_id = (p->>'id')::bigint AND status = 'running' AND (p->>'final')::boolean RETURNING id)
  SELECT EXISTS (SELECT FROM done)
  FROM (SELECT count(pg_notify('cronguard_requests_done', (p->>'schema') || ':' || id)) FROM ended) AS heard;
$$;
