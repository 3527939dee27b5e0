import { FAILED_REQUESTS, RECENT_RUNS } from '../jobs.js';
import type { RunFilter } from '../types.js';

// Every SQLite statement of the run log, parameterised (@name).

const RUN_COLUMNS = 'job, host, trigger, attempt, pid, username, command, started_at, tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start, slot, max_running';
const RUN_VALUES = '@job, @host, @trigger, @attempt, @pid, @username, @command, @started_at, @tick, @lock_backend, @lock_key, @run_key, @invoked_at, @wrapper_start, @slot, @max_running';
// A run's columns but its output, which lists never read.
const LIST_COLUMNS = `id, job, status, trigger, attempt, host, pid, child_pid, username, command, started_at, finished_at, duration_ms,
                      exit_code, signal, output_truncated, overlaps, request_id, error,
                      tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start, slot, max_running`;
const OUTCOME = 'status, finished_at, duration_ms, exit_code, signal, output, output_truncated, error';
const ABANDONED = `'wrapper (pid ' || pid || ') vanished without recording an outcome'`;

export const SQL = {
  // The running copies of the job that were given another --max-running than this one, oldest
  // first (admitIn holds against it only those that may still run: disagreement.ts).
  otherSlots: `SELECT id, host, pid, started_at, max_running, wrapper_start, lock_backend, lock_key FROM runs
               WHERE job = ? AND status = 'running' AND COALESCE(max_running, 1) <> ? ORDER BY id`,
  runningHere: `SELECT id, pid, wrapper_start, lock_backend, lock_key FROM runs WHERE job = ? AND host = ? AND status = 'running'`,
  abandon: `UPDATE runs SET status = 'abandoned', finished_at = ?, error = ${ABANDONED} WHERE id = ? AND status = 'running'`,
  // The requests of a run that ended without a word end with it.
  failRequestsOf: `UPDATE requests SET status = 'failed', finished_at = ? WHERE run_id = ? AND status = 'running'`,
  // Finished runs of this host (not this wrapper's) whose claims are still `running`: their
  // wrapper vanished between two attempts, or before their requests could end.
  orphanedHere: `SELECT DISTINCT r.id, r.pid, r.wrapper_start, r.lock_backend, r.lock_key FROM requests q JOIN runs r ON r.id = q.run_id
                 WHERE q.job = @job AND q.status = 'running' AND r.status <> 'running' AND r.host = @host
                   AND NOT (r.pid = @pid AND r.wrapper_start IS @wrapper_start)`,
  // Such a run's claims: back to `pending` when its command never started (no child pid),
  // else `failed` with its last exit code and why (PostgreSQL: settle_claims_of()).
  claimsUnstarted: `UPDATE requests SET status = 'pending', run_id = NULL, claimed_at = NULL, attempts = max(attempts - 1, 0)
                    WHERE run_id = @id AND status = 'running' AND (SELECT child_pid FROM runs WHERE id = @id) IS NULL`,
  claimsCut: `UPDATE requests SET status = 'failed', finished_at = @now, exit_code = (SELECT exit_code FROM runs WHERE id = @id),
                error = 'run ' || run_id || ' ended without its last attempt: its wrapper vanished before it could retry or record the end'
              WHERE run_id = @id AND status = 'running'`,
  // A delivered record's claims (see claimsOf): those its command was never given go back to
  // `pending`; on its last attempt, those it served end with it, linked to this attempt.
  claimsNotServed: `UPDATE requests SET status = 'pending', run_id = NULL, claimed_at = NULL, attempts = max(attempts - 1, 0)
                    WHERE run_id = @id AND status = 'running' AND id NOT IN (SELECT value FROM json_each(@served))`,
  claimsServed: `UPDATE requests SET status = @status, finished_at = @finished_at, exit_code = @exit_code, run_id = @id
                 WHERE id IN (SELECT value FROM json_each(@served)) AND status = 'running'`,
  // not_before as a time, not as text: SQLite's own datetime('now', '+1 hour') writes
  // '2026-12-01 18:00:00', which as text sorts before every ISO time of that day.
  // args as bytes: text a web application wrote that is not UTF-8 would read as U+FFFD.
  dueRequests: `SELECT id, CAST(args AS BLOB) AS args FROM requests WHERE job = ? AND status = 'pending' AND julianday(not_before) <= julianday(?) ORDER BY id`,
  claimRequest: `UPDATE requests SET status = 'running', claimed_at = @now, attempts = attempts + 1, run_id = @run_id
                 WHERE id = @id AND status = 'pending'`,
  // The latest run by id, not max(started_at): one index probe however long the log.
  lastStart: `SELECT started_at AS at FROM runs WHERE job = ? AND status <> 'abandoned' ORDER BY id DESC LIMIT 1`,
  scheduleOf: `SELECT schedule, unscheduled_said_at AS said FROM jobs WHERE name = ?`,
  // A run of --scheduled said that the job has no schedule (job, when): once a day.
  saidUnscheduled: `INSERT INTO jobs (name, unscheduled_said_at) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET unscheduled_said_at = excluded.unscheduled_said_at`,
  // The alert state (wantAlert, alertSent; migration 0014): the outcome wanted; the claim of
  // a delivery, taken only while none is under way and the wanted state is not the one
  // delivered; the delivered state, set and the claim freed by its holder alone.
  alertWanted: `INSERT INTO jobs (name, alert_failing, alert_run) VALUES (@job, @failing, @run)
                ON CONFLICT (name) DO UPDATE SET alert_failing = excluded.alert_failing, alert_run = excluded.alert_run`,
  alertClaim: `UPDATE jobs SET alert_claim = @token, alert_claimed_until = @until
               WHERE name = @job AND (alert_claim IS NULL OR alert_claimed_until < @now)
                 AND alert_failing IS NOT NULL AND alert_failing <> (alerted_at IS NOT NULL)
               RETURNING alert_failing AS failing, alert_run AS run_id`,
  alertDelivered: `UPDATE jobs SET alerted_at = CASE WHEN @failing THEN coalesce(alerted_at, @now) END, alert_claim = NULL
                   WHERE name = @job AND alert_claim = @token`,
  alertFreed: `UPDATE jobs SET alert_claim = NULL WHERE name = @job AND alert_claim = @token`,
  pendingOverlaps: `SELECT pending_overlaps AS n FROM jobs WHERE name = ?`,
  resetOverlaps: `UPDATE jobs SET pending_overlaps = 0 WHERE name = ?`,
  insertRun: `INSERT INTO runs (status, overlaps, request_id, ${RUN_COLUMNS}) VALUES ('running', @overlaps, @request_id, ${RUN_VALUES})`,
  // The job as its latest admitted run saw it (the row exists: the insert trigger made it).
  register: `UPDATE jobs SET command = @command, host = @host, min_interval_ms = @min_interval_ms, last_seen_at = @started_at
             WHERE name = @job`,
  setChildPid: `UPDATE runs SET child_pid = ?, command = ? WHERE id = ?`,
  // Stops (migration 0011): asked of a running run only; the latest request wins.
  requestStop: `INSERT INTO stop_requests (run_id, signal, requested_by, requested_at)
                SELECT id, @signal, @by, @at FROM runs WHERE id = @id AND (status = 'running' OR @between = 1)
                ON CONFLICT (run_id) DO UPDATE SET signal = excluded.signal, requested_by = excluded.requested_by, requested_at = excluded.requested_at`,
  stopRequest: `SELECT signal, requested_by AS by FROM stop_requests WHERE run_id = ?`,
  amendError: `UPDATE runs SET error = ? WHERE id = ? AND status <> 'running' AND (error IS NULL OR error NOT LIKE 'replaced by run %')`,
  finishRun: `UPDATE runs SET status = @status, finished_at = @finished_at, duration_ms = @duration_ms, exit_code = @exit_code,
                signal = @signal, output = @output, output_truncated = @output_truncated, error = @error
              WHERE id = @id`,
  finishRequests: `UPDATE requests SET status = @status, finished_at = @finished_at, exit_code = @exit_code
                   WHERE run_id = @id AND status = 'running'`,
  retryRequests: `UPDATE requests SET run_id = @run_id, attempts = attempts + 1 WHERE run_id = @previous AND status = 'running'`,
  settleRequest: `UPDATE requests SET status = @status, finished_at = @now, exit_code = @exit_code, error = @error
                  WHERE id = @id AND run_id = @run_id AND status = 'running'`,
  // Requests a run gives back: to wait for the next run, or failed without running.
  requestsLater: `UPDATE requests SET status = 'pending', run_id = NULL, claimed_at = NULL, attempts = max(attempts - 1, 0)
                  WHERE run_id = @run_id AND status = 'running' AND id IN (SELECT value FROM json_each(@ids))`,
  requestsRefused: `UPDATE requests SET status = 'failed', run_id = NULL, finished_at = @now, error = @reason
                    WHERE run_id = @run_id AND status = 'running' AND id IN (SELECT value FROM json_each(@ids))`,
  firstRequestOf: `SELECT min(id) AS id FROM requests WHERE run_id = ?`,
  // A skip, on the running row, else on the latest run whose wrapper (the pid that took the
  // lock, from /proc/locks) left something running that holds the lock still.
  overlap: `UPDATE runs SET overlaps = overlaps + 1
            WHERE id = coalesce((SELECT id FROM runs WHERE job = @job AND status = 'running' ORDER BY id DESC LIMIT 1),
                                (SELECT id FROM runs WHERE job = @job AND pid = @holder_pid ORDER BY id DESC LIMIT 1))
            RETURNING id, host, pid, started_at`,
  holding: `INSERT INTO jobs (name, holding_host, holding_pid, holding_until, holding_lock, holding_key) VALUES (@job, @host, @pid, @until, @lock, @key)
            ON CONFLICT (name) DO UPDATE SET holding_host = @host, holding_pid = @pid, holding_until = @until, holding_lock = @lock, holding_key = @key`,
  blocked: `INSERT INTO jobs (name, blocked_by, blocked_at) VALUES (@job, @by, @at)
            ON CONFLICT (name) DO UPDATE SET blocked_by = @by, blocked_at = @at`,
  overlapPending: `INSERT INTO jobs (name, pending_overlaps) VALUES (?, 1)
                   ON CONFLICT (name) DO UPDATE SET pending_overlaps = pending_overlaps + 1`,
  // One row per run key, however often a record is written; a key that names another run's
  // row (not the same job, host, pid and invocation) changes nothing, and neither does an
  // `abandoned` guessed from an old record of a run that did finish.
  importRun: `INSERT INTO runs (${RUN_COLUMNS}, child_pid, ${OUTCOME})
              VALUES (${RUN_VALUES}, @child_pid, @status, @finished_at, @duration_ms, @exit_code, @signal, @output,
                @output_truncated, @error)
              ON CONFLICT (run_key) DO UPDATE SET child_pid = coalesce(excluded.child_pid, child_pid), status = excluded.status,
                finished_at = excluded.finished_at, duration_ms = excluded.duration_ms, exit_code = excluded.exit_code,
                signal = excluded.signal, output = excluded.output, output_truncated = excluded.output_truncated,
                error = excluded.error
              WHERE job = excluded.job AND host = excluded.host AND pid = excluded.pid AND invoked_at = excluded.invoked_at
                AND (excluded.status <> 'abandoned' OR status IN ('running', 'abandoned'))
              RETURNING id`,
  // The row a run key names, and whether it is this run's (importRun changed nothing).
  keyOwner: `SELECT id, (job = @job AND host = @host AND pid = @pid AND invoked_at = @invoked_at) AS same FROM runs
             WHERE run_key = @run_key`,
  getRun: `SELECT * FROM runs WHERE id = ?`,
  runTail: `SELECT ${LIST_COLUMNS}, substr(output, -@chars) AS output, coalesce(length(output) > @chars, 0) AS output_cut
            FROM runs WHERE id = @id`,
  latestRun: `SELECT * FROM runs WHERE job = ? ORDER BY id DESC LIMIT 1`,
  addRequest: `INSERT INTO requests (job, args, not_before, requested_by) VALUES (@job, @args, @not_before, @requested_by)
               RETURNING id`,
  cancelRequest: `UPDATE requests SET status = 'cancelled', finished_at = @now WHERE id = @id AND status = 'pending'
                  RETURNING id`,
  getRequest: `SELECT * FROM requests WHERE id = ?`,
  listRequests: `SELECT * FROM requests WHERE (@job IS NULL OR job = @job) ORDER BY id DESC LIMIT @limit`,
  hasDueRequest: `SELECT 1 FROM requests WHERE job = ? AND status = 'pending' AND julianday(not_before) <= julianday(?) LIMIT 1`,
  unsettledRuns: `SELECT id, status, host, pid, wrapper_start, lock_backend, lock_key FROM runs WHERE job = @job AND status = 'running'
                  UNION SELECT r.id, r.status, r.host, r.pid, r.wrapper_start, r.lock_backend, r.lock_key
                  FROM requests q JOIN runs r ON r.id = q.run_id WHERE q.job = @job AND q.status = 'running'`,
  // Pauses (pause.ts). The job's own pause, if it holds at `now` (job, now).
  paused: `SELECT disabled_reason AS reason, disabled_at AS since, disabled_by AS by, disabled_until AS until FROM jobs
           WHERE name = ? AND disabled AND (disabled_until IS NULL OR disabled_until > ?)`,
  fleetPause: `SELECT reason, paused_at AS since, paused_by AS by, until_at AS until FROM fleet_pause
          WHERE id = 1 AND paused AND (until_at IS NULL OR until_at > ?)`,
  pause: `INSERT INTO jobs (name, disabled, disabled_reason, disabled_at, disabled_by, disabled_until) VALUES (@job, 1, @reason, @since, @by, @until)
          ON CONFLICT (name) DO UPDATE SET disabled = 1, disabled_reason = @reason, disabled_at = @since, disabled_by = @by, disabled_until = @until`,
  resume: `UPDATE jobs SET disabled = 0, disabled_reason = NULL, disabled_at = NULL, disabled_by = NULL, disabled_until = NULL
           WHERE name = ? AND disabled`,
  pauseFleet: `UPDATE fleet_pause SET paused = 1, reason = @reason, paused_at = @since, paused_by = @by, until_at = @until WHERE id = 1`,
  resumeFleet: `UPDATE fleet_pause SET paused = 0, reason = NULL, paused_at = NULL, paused_by = NULL, until_at = NULL
                WHERE id = 1 AND paused AND (until_at IS NULL OR until_at > ?)`,
  pauseEvent: `INSERT INTO pause_events (job, action, event_at, event_by, reason, until_at) VALUES (@job, @action, @at, @by, @reason, @until)`,
  pauseEvents: `SELECT id, job, action, event_at AS at, event_by AS by, reason, until_at AS until FROM pause_events
           WHERE job = ? OR job IS NULL ORDER BY id DESC LIMIT ?`,
  schedule: `INSERT INTO jobs (name, schedule) VALUES (@job, @schedule) ON CONFLICT (name) DO UPDATE SET schedule = @schedule`,
  unschedule: `UPDATE jobs SET schedule = NULL WHERE name = ?`,
  // One row per job the log knows of (a row in jobs, or a pending request): what runs now, how
  // it last ended and last succeeded, its latest finished runs, what waits for it. Every
  // part is an index probe per job, so the cost follows the number of jobs, not of runs.
  // A recent run is `retried` when the job's next row (running or not) is its invocation's
  // next attempt: the same host and pid, trigger retry, the next attempt number. Only a run
  // that did not succeed is looked at, with one probe: a window over each job's runs made
  // the statement four times slower. A fleet whose hosts run a job each under a lock of their
  // own may record another host's run in between; that failure then counts as final.
  jobStatus: `WITH names AS (SELECT name FROM jobs UNION SELECT job FROM requests WHERE status = 'pending')
              SELECT n.name AS job, coalesce(j.disabled AND (j.disabled_until IS NULL OR j.disabled_until > @now), 0) AS disabled,
                     j.disabled_reason, j.disabled_at AS disabled_since, j.disabled_by, j.disabled_until, j.command, j.host, j.last_seen_at, j.min_interval_ms, j.schedule, j.blocked_by, j.blocked_at,
                     j.holding_host, j.holding_pid, j.holding_until, j.holding_lock, j.holding_key,
                     r.id AS running_run_id, r.started_at AS running_since, r.host AS running_host, r.pid AS running_pid,
                     l.id AS last_run_id, l.status AS last_status, l.exit_code AS last_exit_code, l.signal AS last_signal,
                     l.started_at AS last_started_at, l.finished_at AS last_finished_at, l.duration_ms AS last_duration_ms,
                     l.overlaps AS last_overlaps,
                     s.id AS last_success_run_id, s.started_at AS last_success_at, s.duration_ms AS last_success_duration_ms,
                     (SELECT count(*) FROM requests q WHERE q.job = n.name AND q.status = 'pending') AS pending_requests,
                     -- Each target (a request's args) whose latest finished request failed (see isFailing).
                     (SELECT json_group_array(json_object('id', f.id, 'args', json(f.args), 'error', f.error))
                      FROM (SELECT q.id, q.args, q.error FROM requests q WHERE q.job = n.name AND q.status = 'failed' AND q.args <> '[]'
                              AND NOT EXISTS (SELECT 1 FROM requests z WHERE z.job = q.job AND z.args = q.args AND z.id > q.id
                                                AND z.status IN ('succeeded', 'failed'))
                            ORDER BY q.id DESC LIMIT ${FAILED_REQUESTS}) f) AS failed_requests,
                     (SELECT json_group_array(json_object('id', id, 'status', status, 'duration_ms', duration_ms, 'retried', retried))
                      FROM (SELECT id, status, duration_ms,
                                   CASE WHEN status = 'succeeded' THEN 0 ELSE coalesce(
                                     (SELECT z.trigger = 'retry' AND z.attempt = y.attempt + 1 AND z.host = y.host AND z.pid = y.pid
                                      FROM runs z WHERE z.job = n.name AND z.id > y.id ORDER BY z.id LIMIT 1), 0) END AS retried
                            FROM runs y WHERE job = n.name AND status <> 'running' ORDER BY id DESC LIMIT ${RECENT_RUNS})) AS recent,
                     (SELECT json_group_object(status, n) FROM run_counts c WHERE c.job = n.name) AS runs_total,
                     -- Another job running under the lock this job last took (--lock-file, --lock-key).
                     (SELECT o.job FROM runs o WHERE o.status = 'running' AND o.job <> n.name
                        AND o.lock_backend = l.lock_backend AND o.lock_key = l.lock_key
                      ORDER BY o.id DESC LIMIT 1) AS lock_held_by
              FROM names n
              LEFT JOIN jobs j ON j.name = n.name
              LEFT JOIN runs r ON r.id = (SELECT id FROM runs WHERE job = n.name AND status = 'running' ORDER BY id DESC LIMIT 1)
              LEFT JOIN runs l ON l.id = (SELECT id FROM runs WHERE job = n.name AND status <> 'running' ORDER BY id DESC LIMIT 1)
              LEFT JOIN runs s ON s.id = (SELECT id FROM runs WHERE job = n.name AND status = 'succeeded' ORDER BY id DESC LIMIT 1)
              WHERE @job IS NULL OR n.name = @job
              ORDER BY n.name`,
  // Retention: the newest run id old enough to go, then batches of finished runs up to it,
  // oldest first, each its own short transaction so that runs are never held up for long.
  // A job's latest @keep runs, its latest success and running rows always stay.
  pruneBound: `SELECT max(id) AS id FROM runs WHERE started_at < ?`,
  pruneRuns: `DELETE FROM runs WHERE id IN (
                SELECT r.id FROM runs r
                WHERE r.id > @after AND r.id <= @bound AND r.started_at < @cutoff AND r.status <> 'running'
                  AND (@keep = 0 OR r.id < coalesce((SELECT k.id FROM runs k WHERE k.job = r.job
                                                     ORDER BY k.id DESC LIMIT 1 OFFSET @keep - 1), 0))
                  AND NOT (r.status = 'succeeded' AND NOT EXISTS (SELECT 1 FROM runs s WHERE s.job = r.job
                                                                  AND s.status = 'succeeded' AND s.id > r.id))
                ORDER BY r.id LIMIT @batch)
              RETURNING id`,
  pruneRequests: `DELETE FROM requests WHERE id IN (
                    SELECT id FROM requests WHERE status IN ('succeeded', 'failed', 'cancelled')
                      AND coalesce(finished_at, requested_at) < @cutoff ORDER BY id LIMIT @batch)`,
  // Claims a periodic task for this run if it is due; `release` makes it due again at once.
  claimTask: `INSERT INTO housekeeping (task, last_at) VALUES (@task, @now)
              ON CONFLICT (task) DO UPDATE SET last_at = @now WHERE last_at < @due
              RETURNING task`,
  releaseTask: `UPDATE housekeeping SET last_at = '1970-01-01T00:00:00.000Z' WHERE task = ?`,
} as const;

// history's filters: only those given become conditions, so each query is one the planner
// can serve from an index (a job's runs, a time range, or the newest ids).
export function listRunsSql(filter: RunFilter): string {
  const where = [
    filter.jobs?.length ? 'job IN (SELECT value FROM json_each(@jobs))' : null,
    filter.status ? 'status = @status' : null,
    filter.host ? 'host = @host' : null,
    filter.slot !== undefined ? 'coalesce(slot, 0) = @slot' : null,
    filter.since ? 'started_at >= @since' : null,
    filter.beforeId ? 'id < @before_id' : null,
  ].filter((c) => c !== null);
  return `SELECT ${filter.withOutput ? '*' : `${LIST_COLUMNS}, NULL AS output`} FROM runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT @limit`;
}
