-- "Run now" requests, pausing, and the admission of a run as one function.

CREATE TABLE {{schema}}.requests (
  id           bigserial   PRIMARY KEY,
  job          text        NOT NULL CHECK (job ~ '^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$' AND length(job) <= 100 AND job !~ '^[0-9]+$'),
  args         text[]      NOT NULL DEFAULT '{}',
  requested_by text,
  requested_at timestamptz NOT NULL DEFAULT now(),
  not_before   timestamptz NOT NULL DEFAULT now(),
  status       text        NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
  attempts     integer     NOT NULL DEFAULT 0,
  claimed_at   timestamptz,
  run_id       bigint,
  finished_at  timestamptz,
  exit_code    integer
);
CREATE INDEX requests_due ON {{schema}}.requests (job, id) WHERE status = 'pending';
CREATE INDEX requests_run ON {{schema}}.requests (run_id) WHERE status = 'running';
CREATE INDEX requests_job_id ON {{schema}}.requests (job, id DESC);

-- Who paused a job; and the job as its last admitted run saw it, for status and the web
-- page: its command and host, its minimum interval (for the next due time), when last seen.
ALTER TABLE {{schema}}.jobs ADD COLUMN disabled_by text, ADD COLUMN command text, ADD COLUMN host text,
  ADD COLUMN min_interval_ms bigint, ADD COLUMN last_seen_at timestamptz;

-- Loops waiting for requests (--every, --on-request --for) LISTEN on this channel; a plain
-- INSERT wakes them as well as request().
CREATE FUNCTION {{schema}}.notify_request() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('cronguard_requests', TG_TABLE_SCHEMA || ':' || NEW.job);
  RETURN NULL;
END $$;
CREATE TRIGGER requests_notify AFTER INSERT ON {{schema}}.requests
  FOR EACH ROW EXECUTE FUNCTION {{schema}}.notify_request();

-- What a web application calls: SELECT cronguard.request('backup');
CREATE FUNCTION {{schema}}.request(job text, args text[] DEFAULT '{}', at timestamptz DEFAULT now(), requested_by text DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
  INSERT INTO {{schema}}.requests (job, args, not_before, requested_by)
  VALUES ($1, coalesce($2, '{}'), coalesce($3, now()), $4) RETURNING id
$$;
