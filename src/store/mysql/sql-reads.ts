import type { RunFilter } from '../types.js';
import { BY_ID, BY_STATUS, marks } from './sql.js';

// The MySQL/MariaDB statements beside the run path's (sql.ts): requests, what history,
// logs, status and the web page read, retention and periodic tasks. D is the quoted database.

// A run's columns but its output, which lists never read.
const LIST_COLUMNS = `id, job, status, \`trigger\`, attempt, host, pid, child_pid, username, command, started_at, finished_at, duration_ms,
                      exit_code, \`signal\`, output_truncated, overlaps, request_id, error,
                      tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start, slot, max_running`;
// Database locks: a run under one is proven ended, on any host, by whoever holds it next.
const FLEET_LOCKS = `'mysql', 'lease'`;

export function readSql(D: string) {
  return {
    addRequest: `INSERT INTO ${D}.requests (job, args, not_before, requested_by) VALUES (?, ?, ?, ?)`,
    cancelRequest: `UPDATE ${D}.requests SET status = 'cancelled', finished_at = UTC_TIMESTAMP(6) WHERE id = ? AND status = 'pending'`,
    getRequest: `SELECT * FROM ${D}.requests WHERE id = ?`,
    listRequests: `SELECT * FROM ${D}.requests WHERE (? IS NULL OR job = ?) ORDER BY id DESC LIMIT ?`,
    // What a waiting loop polls: a range of the requests_due index.
    hasDueRequest: `SELECT 1 AS due FROM ${D}.requests WHERE job = ? AND status = 'pending' AND not_before <= UTC_TIMESTAMP(6) LIMIT 1`,
    schedule: `INSERT INTO ${D}.jobs (name, schedule) VALUES (?, ?) ON DUPLICATE KEY UPDATE schedule = ?`,
    unschedule: `UPDATE ${D}.jobs SET schedule = NULL WHERE name = ?`,
    getRun: `SELECT * FROM ${D}.runs WHERE id = ?`,
    // Leases held now (unexpired on the server's clock), for `locks`, `status` and the web
    // page; numbers past 2^53 as text.
    leases: `SELECT job, host, pid, CAST(run_id AS CHAR) AS run_id, CAST(epoch AS CHAR) AS epoch, CAST(lock_key AS CHAR) AS \`key\`,
               acquired_at, expires_at, CAST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) DIV 1000 AS CHAR) AS expires_in_ms
             FROM ${D}.leases WHERE expires_at > UTC_TIMESTAMP(6) ORDER BY job`,
    // (chars, chars, id): RIGHT and CHAR_LENGTH count characters, not bytes.
    runTail: `SELECT ${LIST_COLUMNS}, RIGHT(output, ?) AS output, COALESCE(CHAR_LENGTH(output) > ?, 0) AS output_cut FROM ${D}.runs WHERE id = ?`,
    latestRun: `SELECT * FROM ${D}.runs ${BY_ID} WHERE job = ? ORDER BY id DESC LIMIT 1`,
    // One row per job the log knows of (a row in jobs, or a pending request): what runs now,
    // how it last ended and last succeeded, what waits for it; each part an index probe per
    // job (job, job). Its recent runs come from recentRuns: MySQL has no LATERAL, and a
    // correlated derived table is MySQL 8's alone.
    jobStatus: `WITH names AS (SELECT name FROM ${D}.jobs UNION SELECT job FROM ${D}.requests WHERE status = 'pending')
                SELECT n.name AS job, COALESCE(j.disabled AND (j.disabled_until IS NULL OR j.disabled_until > UTC_TIMESTAMP(6)), FALSE) AS disabled,
                       j.disabled_reason, j.disabled_at AS disabled_since, j.disabled_by, j.disabled_until, j.command, j.host, j.last_seen_at, j.min_interval_ms, j.schedule, j.blocked_by, j.blocked_at,
                     j.holding_host, j.holding_pid, j.holding_until, j.holding_lock, j.holding_key,
                       r.id AS running_run_id, r.started_at AS running_since, r.host AS running_host, r.pid AS running_pid,
                       l.id AS last_run_id, l.status AS last_status, l.exit_code AS last_exit_code, l.\`signal\` AS last_signal,
                       l.started_at AS last_started_at, l.finished_at AS last_finished_at, l.duration_ms AS last_duration_ms,
                       l.overlaps AS last_overlaps,
                       s.id AS last_success_run_id, s.started_at AS last_success_at, s.duration_ms AS last_success_duration_ms,
                       (SELECT COUNT(*) FROM ${D}.requests q WHERE q.job = n.name AND q.status = 'pending') AS pending_requests,
                       -- Each target (a request's args) whose latest finished request failed (see isFailing);
                       -- not a derived table (MariaDB has no correlated one): the newest are kept in jobStatusOf.
                       (SELECT JSON_ARRAYAGG(JSON_OBJECT('id', q.id, 'args', q.args, 'error', q.error))
                        FROM ${D}.requests q WHERE q.job = n.name AND q.status = 'failed' AND JSON_LENGTH(q.args) > 0
                          AND NOT EXISTS (SELECT 1 FROM ${D}.requests z WHERE z.job = q.job AND z.args = q.args AND z.id > q.id
                                            AND z.status IN ('succeeded', 'failed'))) AS failed_requests,
                       (SELECT JSON_OBJECTAGG(c.status, c.n) FROM ${D}.run_counts c WHERE c.job = n.name) AS runs_total,
                       -- Another job running under the lock this job last took (--lock-file,
                       -- --lock-key); a local lock is the same lock on the same host only.
                       (SELECT o.job FROM ${D}.runs o WHERE o.status = 'running' AND o.job <> n.name
                          AND o.lock_backend = l.lock_backend AND o.lock_key = l.lock_key
                          AND (o.lock_backend IN (${FLEET_LOCKS}) OR o.host = l.host)
                        ORDER BY o.id DESC LIMIT 1) AS lock_held_by
                FROM names n
                LEFT JOIN ${D}.jobs j ON j.name = n.name
                LEFT JOIN ${D}.runs r ON r.id = (SELECT x.id FROM ${D}.runs x ${BY_STATUS} WHERE x.job = n.name AND x.status = 'running' ORDER BY x.id DESC LIMIT 1)
                LEFT JOIN ${D}.runs l ON l.id = (SELECT x.id FROM ${D}.runs x ${BY_ID} WHERE x.job = n.name AND x.status <> 'running' ORDER BY x.id DESC LIMIT 1)
                LEFT JOIN ${D}.runs s ON s.id = (SELECT x.id FROM ${D}.runs x ${BY_STATUS} WHERE x.job = n.name AND x.status = 'succeeded' ORDER BY x.id DESC LIMIT 1)
                WHERE ? IS NULL OR n.name = ?
                ORDER BY n.name`,
    // Each job's runs from its RECENT-th latest finished one on (running ones too: whether a
    // failure was retried is told by the row after it), oldest first (recent, job, job).
    recentRuns: `SELECT y.job, y.id, y.status, y.duration_ms, y.\`trigger\`, y.attempt, y.host, y.pid
                 FROM ${D}.jobs j JOIN ${D}.runs y ON y.job = j.name
                   AND y.id >= COALESCE((SELECT k.id FROM ${D}.runs k ${BY_ID} WHERE k.job = j.name AND k.status <> 'running'
                                         ORDER BY k.id DESC LIMIT 1 OFFSET ?), 0)
                 WHERE ? IS NULL OR j.name = ?
                 ORDER BY y.job, y.id`,
    // Retention (see the SQLite statements): the newest id old enough to go, then batches of
    // finished runs up to it, oldest first, each its own short transaction; rows another
    // session has locked are left for next time. MySQL cannot DELETE from a table its own
    // subquery reads: the batch is read (locked), then deleted by id.
    // (after, bound, cutoff, keep, keep, batch)
    pruneBound: `SELECT COALESCE(MAX(id), 0) AS id FROM ${D}.runs WHERE started_at < ?`,
    pruneBatch: `SELECT r.id FROM ${D}.runs r
                 WHERE r.id > ? AND r.id <= ? AND r.started_at < ? AND r.status <> 'running'
                   AND (? = 0 OR r.id < COALESCE((SELECT k.id FROM ${D}.runs k ${BY_ID} WHERE k.job = r.job ORDER BY k.id DESC LIMIT 1 OFFSET ?), 0))
                   AND NOT (r.status = 'succeeded' AND NOT EXISTS (SELECT 1 FROM ${D}.runs s ${BY_STATUS} WHERE s.job = r.job
                                                                   AND s.status = 'succeeded' AND s.id > r.id))
                 ORDER BY r.id LIMIT ? FOR UPDATE SKIP LOCKED`,
    pruneRuns: (n: number) => `DELETE FROM ${D}.runs WHERE id IN (${marks(n)})`,
    pruneRequests: `DELETE FROM ${D}.requests WHERE status IN ('succeeded', 'failed', 'cancelled') AND COALESCE(finished_at, requested_at) < ?
                    ORDER BY id LIMIT ?`,
    // A periodic task: its row, locked (then inserted or moved on), or made due again.
    taskRow: `SELECT last_at FROM ${D}.housekeeping WHERE task = ? FOR UPDATE`,
    taskNew: `INSERT INTO ${D}.housekeeping (task, last_at) VALUES (?, ?)`,
    taskRan: `UPDATE ${D}.housekeeping SET last_at = ? WHERE task = ?`,
    releaseTask: `UPDATE ${D}.housekeeping SET last_at = '1970-01-01 00:00:00' WHERE task = ?`,
    // The spool's key for this server: MySQL's @@server_uuid; MariaDB has none, so its
    // server_id and host name (the same across restarts, as the uuid is).
    identity: `SELECT @@version AS version, @@server_id AS server_id, @@hostname AS hostname`,
    serverUuid: `SELECT @@server_uuid AS uuid`,
  };
}

export type ReadSql = ReturnType<typeof readSql>;

// history's filters: only those given become conditions, so each query is one the server can
// serve from an index (a job's runs, a time range, or the newest ids). Values in the order
// listRunsParams gives them.
export function listRunsSql(D: string, filter: RunFilter): string {
  const where = [
    filter.jobs?.length ? `job IN (${marks(filter.jobs.length)})` : null,
    filter.status ? 'status = ?' : null,
    filter.host ? 'host = ?' : null,
    filter.slot !== undefined ? 'COALESCE(slot, 0) = ?' : null,
    filter.since ? 'started_at >= ?' : null,
    filter.beforeId ? 'id < ?' : null,
  ].filter((c) => c !== null);
  const columns = filter.withOutput ? '*' : `${LIST_COLUMNS}, NULL AS output`;
  // A job's runs: its own index, not the primary key walked backwards (see BY_ID).
  return `SELECT ${columns} FROM ${D}.runs ${filter.jobs?.length ? BY_ID : ''} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`;
}

export function listRunsParams(filter: RunFilter): unknown[] {
  return [
    ...(filter.jobs?.length ? filter.jobs : []),
    ...(filter.status ? [filter.status] : []),
    ...(filter.host ? [filter.host] : []),
    ...(filter.slot !== undefined ? [filter.slot] : []),
    ...(filter.since ? [new Date(filter.since)] : []),
    ...(filter.beforeId ? [filter.beforeId] : []),
    filter.limit,
  ];
}

// Pauses (pause.ts): a job's own, until disabled_until; the fleet's one row; their events.
export function pauseSql(D: string) {
  const holds = (until: string) => `(${until} IS NULL OR ${until} > UTC_TIMESTAMP(6))`;
  return {
    fleet: `SELECT reason, paused_at AS since, paused_by AS \`by\`, until_at AS \`until\` FROM ${D}.fleet_pause
            WHERE id = 1 AND paused AND ${holds('until_at')}`,
    // (job, reason, since, by, until, and again for the update)
    pause: `INSERT INTO ${D}.jobs (name, disabled, disabled_reason, disabled_at, disabled_by, disabled_until) VALUES (?, TRUE, ?, ?, ?, ?)
            ON DUPLICATE KEY UPDATE disabled = TRUE, disabled_reason = ?, disabled_at = ?, disabled_by = ?, disabled_until = ?`,
    resume: `UPDATE ${D}.jobs SET disabled = FALSE, disabled_reason = NULL, disabled_at = NULL, disabled_by = NULL, disabled_until = NULL
             WHERE name = ? AND disabled`,
    pauseFleet: `UPDATE ${D}.fleet_pause SET paused = TRUE, reason = ?, paused_at = ?, paused_by = ?, until_at = ? WHERE id = 1`,
    resumeFleet: `UPDATE ${D}.fleet_pause SET paused = FALSE, reason = NULL, paused_at = NULL, paused_by = NULL, until_at = NULL
                  WHERE id = 1 AND paused AND ${holds('until_at')}`,
    event: `INSERT INTO ${D}.pause_events (job, action, event_at, event_by, reason, until_at) VALUES (?, ?, ?, ?, ?, ?)`,
    events: `SELECT id, job, action, event_at AS at, event_by AS \`by\`, reason, until_at AS \`until\` FROM ${D}.pause_events
             WHERE job = ? OR job IS NULL ORDER BY id DESC LIMIT ?`,
  };
}
