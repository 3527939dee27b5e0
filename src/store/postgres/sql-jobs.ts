import { FAILED_REQUESTS, RECENT_RUNS } from '../jobs.js';
import { named } from './named-params.js';

// The PostgreSQL statements about jobs, beside the runs' own (sql.ts): their alert
// state, pauses (a job's and the fleet's) with their events, schedules, and the status
// every reader shows. S is the quoted schema.
export function jobStatements(S: string) {
  return {
    // The alert state (wantAlert, alertSent; migration 0024): the outcome wanted; the claim of
    // a delivery, taken only while none is under way and the wanted state is not the one
    // delivered (a row comes back when taken); the delivered state, set and the claim freed
    // by its holder alone.
    alertWanted: named(`INSERT INTO ${S}.jobs (name, alert_failing, alert_run) VALUES (:job, :failing, :run)
                        ON CONFLICT (name) DO UPDATE SET alert_failing = excluded.alert_failing, alert_run = excluded.alert_run`),
    alertClaim: named(`UPDATE ${S}.jobs SET alert_claim = :token, alert_claimed_until = now() + make_interval(secs => :for_ms / 1000.0)
                       WHERE name = :job AND (alert_claim IS NULL OR alert_claimed_until < now())
                         AND alert_failing IS NOT NULL AND alert_failing <> (alerted_at IS NOT NULL)
                       RETURNING alert_failing AS failing, alert_run AS run_id`),
    alertDelivered: named(`UPDATE ${S}.jobs SET alerted_at = CASE WHEN :failing THEN coalesce(alerted_at, now()) END, alert_claim = NULL
                           WHERE name = :job AND alert_claim = :token`),
    alertFreed: named(`UPDATE ${S}.jobs SET alert_claim = NULL WHERE name = :job AND alert_claim = :token`),
    // A pause or resume of a job and its event, in one statement (its CTE runs whether or not
    // it is read). A resume of a job not paused keeps no event.
    // A job's pause locks the fleet's row first, which waits for the admissions under way
    // (they hold it FOR SHARE while they read the pauses, migration 0021): a drain after it
    // sees the runs they admitted.
    pause: named(`WITH f AS (SELECT 1 FROM ${S}.fleet_pause WHERE id = 1 FOR UPDATE),
                  j AS (INSERT INTO ${S}.jobs (name, disabled, disabled_reason, disabled_at, disabled_by, disabled_until)
                        SELECT :job::text, true, :reason::text, :since::timestamptz, :by::text, :until::timestamptz FROM f
                        ON CONFLICT (name) DO UPDATE SET disabled = true, disabled_reason = excluded.disabled_reason,
                          disabled_at = excluded.disabled_at, disabled_by = excluded.disabled_by, disabled_until = excluded.disabled_until)
                  INSERT INTO ${S}.pause_events (job, action, event_at, event_by, reason, until_at)
                  VALUES (:job, 'pause', :since, :by, :reason, :until)`),
    resume: named(`WITH j AS (UPDATE ${S}.jobs SET disabled = false, disabled_reason = NULL, disabled_at = NULL, disabled_by = NULL,
                               disabled_until = NULL
                             WHERE name = :job AND disabled RETURNING name)
                   INSERT INTO ${S}.pause_events (job, action, event_at, event_by)
                   SELECT name, 'resume', :at::timestamptz, :by::text FROM j`),
    // The fleet's pause: its one row, updated (which waits for admissions reading it, FOR
    // SHARE), and its event; no event when nothing changed.
    pauseFleet: named(`WITH f AS (UPDATE ${S}.fleet_pause SET paused = true, reason = :reason, paused_at = :since, paused_by = :by,
                                    until_at = :until
                                  WHERE id = 1 RETURNING reason, paused_at, paused_by, until_at)
                       INSERT INTO ${S}.pause_events (job, action, event_at, event_by, reason, until_at)
                       SELECT NULL, 'pause', paused_at, paused_by, reason, until_at FROM f RETURNING id`),
    resumeFleet: named(`WITH f AS (UPDATE ${S}.fleet_pause SET paused = false, reason = NULL, paused_at = NULL, paused_by = NULL,
                                     until_at = NULL
                                   WHERE id = 1 AND paused AND (until_at IS NULL OR until_at > now()) RETURNING id)
                        INSERT INTO ${S}.pause_events (job, action, event_at, event_by)
                        SELECT NULL, 'resume', :at::timestamptz, :by::text FROM f RETURNING id`),
    fleetPause: named(`SELECT reason, paused_at AS since, paused_by AS by, until_at AS until FROM ${S}.fleet_pause
                       WHERE id = 1 AND paused AND (until_at IS NULL OR until_at > now())`),
    pauseEvents: named(`SELECT id, job, action, event_at AS at, event_by AS by, reason, until_at AS until FROM ${S}.pause_events
                        WHERE job = :job OR job IS NULL ORDER BY id DESC LIMIT :limit`),
    // Through set_schedule(), so that what PostgreSQL's readers cannot read (a zone only Node
    // knows, US/Pacific-New) is refused when set, not found when the job should run.
    schedule: named(`SELECT ${S}.set_schedule(:job, :schedule)`),
    unschedule: named(`UPDATE ${S}.jobs SET schedule = NULL WHERE name = :job`),
    // One row per job the log knows of (a row in jobs, or a pending request): what runs now, how
    // it last ended and last succeeded, its latest finished runs, what waits for it. Every
    // part is an index probe per job, so the cost follows the number of jobs, not of runs.
    jobStatus: named(`WITH names AS (SELECT name FROM ${S}.jobs UNION SELECT job FROM ${S}.requests WHERE status = 'pending')
                      SELECT n.name AS job, coalesce(j.disabled AND (j.disabled_until IS NULL OR j.disabled_until > now()), false) AS disabled,
                             j.disabled_reason, j.disabled_at AS disabled_since, j.disabled_by, j.disabled_until, j.command, j.host, j.last_seen_at, j.min_interval_ms, j.schedule, j.blocked_by, j.blocked_at,
                     j.holding_host, j.holding_pid, j.holding_until, j.holding_lock, j.holding_key,
                             r.id AS running_run_id, r.started_at AS running_since, r.host AS running_host, r.pid AS running_pid,
                             l.id AS last_run_id, l.status AS last_status, l.exit_code AS last_exit_code, l.signal AS last_signal,
                             l.started_at AS last_started_at, l.finished_at AS last_finished_at, l.duration_ms AS last_duration_ms,
                             l."overlaps" AS last_overlaps,
                             s.id AS last_success_run_id, s.started_at AS last_success_at, s.duration_ms AS last_success_duration_ms,
                             (SELECT count(*) FROM ${S}.requests q WHERE q.job = n.name AND q.status = 'pending')::int AS pending_requests,
                             -- Each target (a request's args) whose latest finished request failed (see isFailing).
                             (SELECT coalesce(jsonb_agg(jsonb_build_object('id', f.id, 'args', to_jsonb(f.args), 'error', f.error)), '[]')
                              FROM (SELECT q.id, q.args, q.error FROM ${S}.requests q WHERE q.job = n.name AND q.status = 'failed' AND q.args <> '{}'
                                      AND NOT EXISTS (SELECT 1 FROM ${S}.requests z WHERE z.job = q.job AND z.args = q.args AND z.id > q.id
                                                        AND z.status IN ('succeeded', 'failed'))
                                    ORDER BY q.id DESC LIMIT ${FAILED_REQUESTS}) f) AS failed_requests,
                             -- 'id status duration,...': building a JSON object per run took two thirds of
                             -- the whole statement for 1,000 jobs (see toJobStatus for the parsing).
                             -- retried (1): the job's next row is its invocation's next attempt (see SQLite's).
                             (SELECT coalesce(string_agg(x.id || ' ' || x.status || ' ' || coalesce(x.duration_ms::text, '-')
                                                         || ' ' || x.retried, ',' ORDER BY x.id), '')
                              FROM (SELECT y.id, y.status, y.duration_ms,
                                           CASE WHEN y.status = 'succeeded' THEN 0 ELSE coalesce(
                                             (SELECT (z.trigger = 'retry' AND z.attempt = y.attempt + 1 AND z.host = y.host AND z.pid = y.pid)::int
                                              FROM ${S}.runs z WHERE z.job = n.name AND z.id > y.id ORDER BY z.id LIMIT 1), 0) END AS retried
                                    FROM ${S}.runs y WHERE y.job = n.name AND y.status <> 'running' ORDER BY y.id DESC LIMIT ${RECENT_RUNS}) x) AS recent,
                             (SELECT coalesce(json_object_agg(c.status, c.n), '{}') FROM ${S}.run_counts c WHERE c.job = n.name) AS runs_total,
                             -- Another job running under the lock this job last took (shared by --lock-file or
                             -- --lock-key); a local lock is the same lock on the same host only.
                             (SELECT o.job FROM ${S}.runs o WHERE o.status = 'running' AND o.job <> n.name
                                AND o.lock_backend = l.lock_backend AND o.lock_key = l.lock_key
                                AND (o.lock_backend = 'postgres' OR o.host = l.host)
                              ORDER BY o.id DESC LIMIT 1) AS lock_held_by
                      FROM names n
                      LEFT JOIN ${S}.jobs j ON j.name = n.name
                      LEFT JOIN LATERAL (SELECT id, started_at, host, pid FROM ${S}.runs
                                         WHERE job = n.name AND status = 'running' ORDER BY id DESC LIMIT 1) r ON true
                      LEFT JOIN LATERAL (SELECT id, status, exit_code, signal, started_at, finished_at, duration_ms, "overlaps",
                                                host, lock_backend, lock_key FROM ${S}.runs
                                         WHERE job = n.name AND status <> 'running' ORDER BY id DESC LIMIT 1) l ON true
                      LEFT JOIN LATERAL (SELECT id, started_at, duration_ms FROM ${S}.runs
                                         WHERE job = n.name AND status = 'succeeded' ORDER BY id DESC LIMIT 1) s ON true
                      WHERE :job::text IS NULL OR n.name = :job
                      ORDER BY n.name`),
  };
}
