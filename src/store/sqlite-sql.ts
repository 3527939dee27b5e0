// Every SQLite statement of the run log, parameterised (@name).

const RUN_COLUMNS = 'job, host, trigger, attempt, pid, username, command, started_at, tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start';
const RUN_VALUES = '@job, @host, @trigger, @attempt, @pid, @username, @command, @started_at, @tick, @lock_backend, @lock_key, @run_key, @invoked_at, @wrapper_start';
const OUTCOME = 'status, finished_at, duration_ms, exit_code, signal, output, output_truncated, error';
const ABANDONED = `'wrapper (pid ' || pid || ') vanished without recording an outcome'`;

export const SQL = {
  paused: `SELECT disabled_reason AS reason, disabled_at AS since, disabled_by AS by FROM jobs WHERE name = ? AND disabled`,
  runningHere: `SELECT id, pid, wrapper_start, lock_backend, lock_key FROM runs WHERE job = ? AND host = ? AND status = 'running'`,
  abandon: `UPDATE runs SET status = 'abandoned', finished_at = ?, error = ${ABANDONED} WHERE id = ? AND status = 'running'`,
  // The requests of a run that ended without a word end with it.
  failRequestsOf: `UPDATE requests SET status = 'failed', finished_at = ? WHERE run_id = ? AND status = 'running'`,
  dueRequests: `SELECT id, args FROM requests WHERE job = ? AND status = 'pending' AND not_before <= ? ORDER BY id`,
  claimRequest: `UPDATE requests SET status = 'running', claimed_at = @now, attempts = attempts + 1, run_id = @run_id
                 WHERE id = @id AND status = 'pending'`,
  lastStart: `SELECT max(started_at) AS at FROM runs WHERE job = ? AND status <> 'abandoned'`,
  pendingOverlaps: `SELECT pending_overlaps AS n FROM jobs WHERE name = ?`,
  resetOverlaps: `UPDATE jobs SET pending_overlaps = 0 WHERE name = ?`,
  insertRun: `INSERT INTO runs (status, overlaps, request_id, ${RUN_COLUMNS}) VALUES ('running', @overlaps, @request_id, ${RUN_VALUES})`,
  // A run of another host in this tick or a later one: it served (or overtook) this tick.
  // One from a minute beyond this host's clock came from a clock running ahead: ignored.
  tickRun: `SELECT id, host, pid, started_at FROM runs WHERE job = ? AND tick >= ? AND tick <= ? AND host <> ?
            ORDER BY id DESC LIMIT 1`,
  countSkip: `UPDATE runs SET overlaps = overlaps + 1 WHERE id = ?`,
  setChildPid: `UPDATE runs SET child_pid = ?, command = ? WHERE id = ?`,
  finishRun: `UPDATE runs SET status = @status, finished_at = @finished_at, duration_ms = @duration_ms, exit_code = @exit_code,
                signal = @signal, output = @output, output_truncated = @output_truncated, error = @error
              WHERE id = @id`,
  finishRequests: `UPDATE requests SET status = @status, finished_at = @finished_at, exit_code = @exit_code
                   WHERE run_id = @id AND status = 'running'`,
  retryRequests: `UPDATE requests SET run_id = @run_id, attempts = attempts + 1 WHERE run_id = @previous AND status = 'running'`,
  firstRequestOf: `SELECT min(id) AS id FROM requests WHERE run_id = ?`,
  // A skip, on the running row, else on the latest run whose wrapper (the pid that took the
  // lock, from /proc/locks) left something running that holds the lock still.
  overlap: `UPDATE runs SET overlaps = overlaps + 1
            WHERE id = coalesce((SELECT max(id) FROM runs WHERE job = @job AND status = 'running'),
                                (SELECT max(id) FROM runs WHERE job = @job AND pid = @holder_pid))
            RETURNING id, host, pid, started_at`,
  overlapPending: `INSERT INTO jobs (name, pending_overlaps) VALUES (?, 1)
                   ON CONFLICT (name) DO UPDATE SET pending_overlaps = pending_overlaps + 1`,
  // One row per run key, however often a record is written; a key that names another run's
  // row (not the same job, host, pid and start) changes nothing, and neither does an
  // `abandoned` guessed from an old record of a run that did finish.
  importRun: `INSERT INTO runs (${RUN_COLUMNS}, child_pid, ${OUTCOME})
              VALUES (${RUN_VALUES}, @child_pid, @status, @finished_at, @duration_ms, @exit_code, @signal, @output,
                @output_truncated, @error)
              ON CONFLICT (run_key) DO UPDATE SET child_pid = coalesce(excluded.child_pid, child_pid), status = excluded.status,
                finished_at = excluded.finished_at, duration_ms = excluded.duration_ms, exit_code = excluded.exit_code,
                signal = excluded.signal, output = excluded.output, output_truncated = excluded.output_truncated,
                error = excluded.error
              WHERE job = excluded.job AND host = excluded.host AND pid = excluded.pid AND started_at = excluded.started_at
                AND (excluded.status <> 'abandoned' OR status IN ('running', 'abandoned'))
              RETURNING id`,
  // The row a run key names, and whether it is this run's (importRun changed nothing).
  keyOwner: `SELECT id, (job = @job AND host = @host AND pid = @pid AND started_at = @started_at) AS same FROM runs
             WHERE run_key = @run_key`,
  listRuns: `SELECT * FROM runs
             WHERE (@job IS NULL OR job = @job) AND (@status IS NULL OR status = @status)
             ORDER BY id DESC LIMIT @limit`,
  getRun: `SELECT * FROM runs WHERE id = ?`,
  latestRun: `SELECT * FROM runs WHERE job = ? ORDER BY id DESC LIMIT 1`,
  addRequest: `INSERT INTO requests (job, args, not_before, requested_by) VALUES (@job, @args, @not_before, @requested_by)
               RETURNING id`,
  cancelRequest: `UPDATE requests SET status = 'cancelled', finished_at = @now WHERE id = @id AND status = 'pending'
                  RETURNING id`,
  getRequest: `SELECT * FROM requests WHERE id = ?`,
  listRequests: `SELECT * FROM requests WHERE (@job IS NULL OR job = @job) ORDER BY id DESC LIMIT @limit`,
  hasDueRequest: `SELECT 1 FROM requests WHERE job = ? AND status = 'pending' AND not_before <= ? LIMIT 1`,
  pause: `INSERT INTO jobs (name, disabled, disabled_reason, disabled_at, disabled_by) VALUES (@job, 1, @reason, @since, @by)
          ON CONFLICT (name) DO UPDATE SET disabled = 1, disabled_reason = @reason, disabled_at = @since, disabled_by = @by`,
  resume: `UPDATE jobs SET disabled = 0, disabled_reason = NULL, disabled_at = NULL, disabled_by = NULL WHERE name = ?`,
  // One row per job the log knows of: what runs now, how it last ended, what waits for it.
  jobStatus: `WITH names AS (SELECT job AS name FROM runs GROUP BY job UNION SELECT name FROM jobs
                             UNION SELECT job FROM requests GROUP BY job)
              SELECT n.name AS job, j.disabled, j.disabled_reason, j.disabled_at AS disabled_since, j.disabled_by,
                     r.id AS running_run_id, r.started_at AS running_since, r.host AS running_host, r.pid AS running_pid,
                     l.id AS last_run_id, l.status AS last_status, l.exit_code AS last_exit_code,
                     l.started_at AS last_started_at, l.finished_at AS last_finished_at,
                     (SELECT max(started_at) FROM runs s WHERE s.job = n.name AND s.status = 'succeeded') AS last_success_at,
                     (SELECT count(*) FROM requests q WHERE q.job = n.name AND q.status = 'pending') AS pending_requests
              FROM names n
              LEFT JOIN jobs j ON j.name = n.name
              LEFT JOIN runs r ON r.id = (SELECT max(id) FROM runs WHERE job = n.name AND status = 'running')
              LEFT JOIN runs l ON l.id = (SELECT max(id) FROM runs WHERE job = n.name AND status <> 'running')
              WHERE @job IS NULL OR n.name = @job
              ORDER BY n.name`,
} as const;
