-- A request to stop a running run (issue 25, `cronguard stop`, `--replace`): the signal to
-- send its command's process group and who asked. The run's wrapper, on whichever host it
-- runs, reads it (a primary-key probe) every few seconds while its command runs; a run
-- nobody stops has no row. One row per run, the latest request winning; it goes with its run.
CREATE TABLE {{schema}}.stop_requests (
  run_id       bigint      PRIMARY KEY REFERENCES {{schema}}.runs (id) ON DELETE CASCADE,
  signal       text        NOT NULL CHECK (signal ~ '^SIG[A-Z0-9+-]+$'),
  requested_by text        NOT NULL CHECK (length(requested_by) <= 300),
  requested_at timestamptz NOT NULL DEFAULT now()
);
