import { advisoryHeld, BACKEND_START } from '../lock/postgres.js';
import { RECENT_RUNS } from './jobs.js';
import type { RunFilter } from './types.js';

// Every PostgreSQL statement of the run log, parameterised; S is the quoted schema.
// Statements name their parameters (:job); named() turns them into $1.. and remembers the
// order, so that a statement and its values cannot drift apart.

export interface Statement {
  readonly text: string;
  readonly names: readonly string[];
}

export function named(text: string): Statement {
  const names: string[] = [];
  const out = text.replace(/(?<!:):([a-z_]+)\b/g, (_, name: string) => {
    const index = names.includes(name) ? names.indexOf(name) : names.push(name) - 1;
    return `$${index + 1}`;
  });
  return { text: out, names };
}

// The server's identity: the same on a physical standby and after its promotion.
const SYSTEM_IDENTIFIER = 'SELECT system_identifier::text FROM pg_catalog.pg_control_system()';

const ABANDONED = `'wrapper (pid ' || pid || ' on ' || host || ') vanished without recording an outcome'`;

// A new run's columns and their parameters.
const RUN_COLUMNS = 'job, host, trigger, attempt, pid, username, command, started_at, tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start';
const RUN_VALUES = `:job, :host, :trigger, :attempt, :pid, :username, :command, :started_at, :tick::timestamptz, :lock_backend,
                    :lock_key, :run_key, :invoked_at, :wrapper_start`;
// A run's columns but its output, which lists never read.
const LIST_COLUMNS = `id, job, status, trigger, attempt, host, pid, child_pid, username, command, started_at, finished_at, duration_ms,
                      exit_code, signal, output_truncated, "overlaps", request_id, error,
                      tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start`;

export function statements(S: string) {
  return {
    // The admission of one run (migration 0005): one round trip, under the postgres lock
    // (when :p has a key) or a local one, after the claims of runs that ended are settled
    // (0011; `orphaned`: this host's such runs the lock does not prove ended), guarded for
    // poolers (0013: `reentered`, `backend`, `holding`), taking a lease (0014: `epoch`). It also names the server
    // (pg_control_system(), executable by PUBLIC): the spool's key after a failover (see
    // Spool), at no round trip of its own.
    admit: named(`SELECT a->'r' AS r, a->'orphaned' AS orphaned, (a->>'backend')::integer AS backend, coalesce((a->>'holding')::boolean, false) AS holding,
                         a->>'epoch' AS epoch,
                         ${BACKEND_START} AS backend_start, (${SYSTEM_IDENTIFIER}) AS system_identifier
                  FROM ${S}.admit(:p::jsonb, true) AS a`),
    systemIdentifier: named(SYSTEM_IDENTIFIER),
    // Of those, the runs whose wrapper is gone.
    settleClaims: named(`SELECT ${S}.settle_claims_of(:ids::bigint[])`),
    // A delivered record's claims (see claimsOf): those its command was never given go back to
    // `pending`; on its last attempt, those it served end with it, linked to this attempt.
    deliveredClaims: named(`WITH back AS (UPDATE ${S}.requests SET status = 'pending', run_id = NULL, claimed_at = NULL,
                                            attempts = greatest(attempts - 1, 0)
                                          WHERE run_id = :id AND status = 'running' AND NOT (id = ANY(:served::bigint[])))
                            UPDATE ${S}.requests SET status = :status, finished_at = :finished_at, exit_code = :exit_code, run_id = :id
                            WHERE :final AND id = ANY(:served::bigint[]) AND status = 'running'`),
    // Rows of this host whose wrapper is gone; their requests failed with them.
    abandon: named(`WITH gone AS (UPDATE ${S}.runs SET status = 'abandoned', finished_at = now(), error = ${ABANDONED}
                                  WHERE id = ANY(:ids::bigint[]) AND status = 'running' RETURNING id)
                    UPDATE ${S}.requests SET status = 'failed', finished_at = now()
                    WHERE run_id IN (SELECT id FROM gone) AND status = 'running'`),
    setChildPid: named(`UPDATE ${S}.runs SET child_pid = :child_pid, command = :command WHERE id = :id`),
    // Stops (migration 0020): asked of a running run only; the latest request wins.
    requestStop: named(`INSERT INTO ${S}.stop_requests (run_id, signal, requested_by) SELECT id, :signal, :by FROM ${S}.runs WHERE id = :id AND (status = 'running' OR :between::boolean)
                        ON CONFLICT (run_id) DO UPDATE SET signal = excluded.signal, requested_by = excluded.requested_by, requested_at = now()
                        RETURNING run_id`),
    stopRequest: named(`SELECT signal, requested_by AS by FROM ${S}.stop_requests WHERE run_id = :id`),
    amendError: named(`UPDATE ${S}.runs SET error = :error WHERE id = :id AND status <> 'running'`),
    // A run's outcome (finish(), migration 0013). With :unlock, the advisory lock goes in the
    // same round trip, once the row is updated: whoever takes the lock next waits for this
    // row, and finds it finished. Only on the server backend that took it (:backend): any
    // other may hold the key for another client of a pooler.
    finish: named(`SELECT CASE WHEN f.done AND :unlock::bigint IS NOT NULL AND pg_backend_pid() = :backend::integer
                                 AND ${advisoryHeld(':unlock::bigint', 'pg_backend_pid()')}
                               THEN pg_advisory_unlock(:unlock::bigint) ELSE false END AS unlocked
                   FROM ${S}.finish(:p::jsonb) AS f(done)`),
    // The same, releasing a lease (:key, :epoch) in the same transaction: whoever takes the
    // lease next finds this row finished. unlocked: the lease was still this holder's.
    finishLease: named(`WITH released AS (DELETE FROM ${S}.leases WHERE lock_key = :key::bigint AND epoch = :epoch::bigint RETURNING 1)
                        SELECT EXISTS (SELECT FROM released) AS unlocked FROM ${S}.finish(:p::jsonb) AS f(done)`),
    // A lease's renewal (migration 0014): only by its holder (the epoch it took) and only
    // while unexpired on the server's clock, over any connection; no row: the lease is lost.
    renewLease: named(`UPDATE ${S}.leases SET renewed_at = now(), expires_at = now() + make_interval(secs => :ttl_ms::numeric / 1000)
                       WHERE lock_key = :key::bigint AND epoch = :epoch::bigint AND expires_at > now() RETURNING epoch`),
    // A lease let go without an outcome to record (a loop that found nothing to run).
    releaseLease: named(`DELETE FROM ${S}.leases WHERE lock_key = :key::bigint AND epoch = :epoch::bigint`),
    // Leases held now, for `locks`, `status` and the web page.
    leases: named(`SELECT job, host, pid, run_id, epoch::text AS epoch, lock_key::text AS key, acquired_at, expires_at,
                          greatest(0, (extract(epoch FROM expires_at - now()) * 1000)::bigint) AS expires_in_ms
                   FROM ${S}.leases WHERE expires_at > now() ORDER BY job`),
    // Requests a run gives back: to wait for the next run (and waiting loops hear of them), or
    // failed without running (and their waiters hear that).
    giveBack: named(`WITH later AS (UPDATE ${S}.requests SET status = 'pending', run_id = NULL, claimed_at = NULL,
                                      attempts = greatest(attempts - 1, 0)
                                    WHERE run_id = :run_id AND status = 'running' AND id = ANY(:later::bigint[]) RETURNING job),
                          refused AS (UPDATE ${S}.requests SET status = 'failed', run_id = NULL, finished_at = now(), error = :reason
                                      WHERE run_id = :run_id AND status = 'running' AND id = ANY(:refused::bigint[]) RETURNING id)
                     SELECT (SELECT count(pg_notify('cronguard_requests', :schema || ':' || job)) FROM (SELECT DISTINCT job FROM later) j) AS woken,
                            (SELECT count(pg_notify('cronguard_requests_done', :schema || ':' || id)) FROM refused) AS ended`),
    // A retry: a new row for the same run, which its requests follow.
    retry: named(`WITH ins AS (INSERT INTO ${S}.runs (status, request_id, ${RUN_COLUMNS})
                                SELECT 'running', (SELECT min(id) FROM ${S}.requests WHERE run_id = :previous), ${RUN_VALUES}
                                RETURNING id),
                       moved AS (UPDATE ${S}.requests SET run_id = (SELECT id FROM ins), attempts = attempts + 1
                                 WHERE run_id = :previous AND status = 'running')
                  SELECT id FROM ins`),
    // A skip for a held lock, counted on the run that holds it: the running row (on :host
    // only, for a local lock), else the latest run whose wrapper (:holder_pid, from
    // /proc/locks) took the lock and left something running that holds it still.
    overlap: named(`WITH target AS (SELECT coalesce(
                        (SELECT max(id) FROM ${S}.runs WHERE job = :job AND status = 'running' AND (:host::text IS NULL OR host = :host)),
                        (SELECT max(id) FROM ${S}.runs WHERE job = :job AND host = :host AND pid = :holder_pid)) AS id),
                   o AS (UPDATE ${S}.runs SET "overlaps" = "overlaps" + 1 WHERE id = (SELECT id FROM target)
                         RETURNING id, host, pid, started_at),
                   p AS (INSERT INTO ${S}.jobs (name, pending_overlaps) SELECT :job, 1 WHERE NOT EXISTS (SELECT 1 FROM o)
                         ON CONFLICT (name) DO UPDATE SET pending_overlaps = ${S}.jobs.pending_overlaps + 1)
              SELECT id, host, pid, started_at FROM o`),
    blocked: named(`INSERT INTO ${S}.jobs (name, blocked_by, blocked_at) VALUES (:job, :by, now())
                    ON CONFLICT (name) DO UPDATE SET blocked_by = :by, blocked_at = now()`),
    // A run written while the log was out of reach, or one that never started: one row per
    // run key, however often it is delivered, and whether or not its start got through. A key
    // that names another run's row (not the same job, host, pid and start) changes nothing,
    // and neither does an `abandoned` guessed from an old record of a run that did finish.
    importRun: named(`INSERT INTO ${S}.runs AS r (${RUN_COLUMNS}, child_pid, status, finished_at, duration_ms, exit_code, signal,
                        output, output_truncated, error)
                      VALUES (${RUN_VALUES}, :child_pid, :status, :finished_at, :duration_ms, :exit_code, :signal, :output,
                        :output_truncated, :error)
                      ON CONFLICT (run_key) DO UPDATE SET child_pid = coalesce(excluded.child_pid, r.child_pid),
                        status = excluded.status, finished_at = excluded.finished_at, duration_ms = excluded.duration_ms,
                        exit_code = excluded.exit_code, signal = excluded.signal, output = excluded.output,
                        output_truncated = excluded.output_truncated, error = excluded.error
                      WHERE r.job = excluded.job AND r.host = excluded.host AND r.pid = excluded.pid
                        AND r.started_at = excluded.started_at
                        AND (excluded.status <> 'abandoned' OR r.status IN ('running', 'abandoned'))
                      RETURNING id`),
    // The row a run key names, and whether it is this run's (importRun changed nothing).
    keyOwner: named(`SELECT id, (job = :job AND host = :host AND pid = :pid AND started_at = :started_at) AS same
                     FROM ${S}.runs WHERE run_key = :run_key`),
    // Advisory locks held right now by cronguard sessions in this database (pg_locks shows
    // the whole server's, and an advisory key is only a lock within its database); a bigint
    // key is split into classid (high 32 bits) and objid (low 32 bits). Which keys are this
    // schema's jobs' is for the caller to say (commands/locks.ts).
    advisoryLocks: named(`SELECT substr(a.application_name, 11) AS job, a.pid AS backend_pid,
                           coalesce(host(a.client_addr), 'local') AS client,
                           ((l.classid::bigint << 32) | l.objid::bigint)::text AS key, a.backend_start
                    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND a.application_name LIKE 'cronguard:%'`),
    addRequest: named(`SELECT ${S}.request(:job, :args::text[], :not_before, :requested_by) AS id`),
    cancelRequest: named(`UPDATE ${S}.requests SET status = 'cancelled', finished_at = now()
                          WHERE id = :id AND status = 'pending' RETURNING id`),
    getRequest: named(`SELECT * FROM ${S}.requests WHERE id = :id`),
    listRequests: named(`SELECT * FROM ${S}.requests WHERE (:job::text IS NULL OR job = :job) ORDER BY id DESC LIMIT :limit`),
    hasDueRequest: named(`SELECT 1 FROM ${S}.requests WHERE job = :job AND status = 'pending' AND not_before <= now() LIMIT 1`),
    unsettledRuns: named(`SELECT id, status, host, pid, wrapper_start, lock_backend, lock_key FROM ${S}.runs WHERE job = :job AND status = 'running'
                          UNION SELECT r.id, r.status, r.host, r.pid, r.wrapper_start, r.lock_backend, r.lock_key
                          FROM ${S}.requests q JOIN ${S}.runs r ON r.id = q.run_id WHERE q.job = :job AND q.status = 'running'`),
    // The alert state's compare-and-set (markAlert): a row comes back only when it moved. A
    // host that finds it moved by another (the conflict's WHERE reads the latest row) gets none.
    alertFailing: named(`INSERT INTO ${S}.jobs (name, alerted_at) VALUES (:job, now())
                         ON CONFLICT (name) DO UPDATE SET alerted_at = excluded.alerted_at WHERE ${S}.jobs.alerted_at IS NULL
                         RETURNING 1 AS moved`),
    alertRecovered: named(`UPDATE ${S}.jobs SET alerted_at = NULL WHERE name = :job AND alerted_at IS NOT NULL RETURNING 1 AS moved`),
    // A pause or resume of a job and its event, in one statement (its CTE runs whether or not
    // it is read). A resume of a job not paused keeps no event.
    pause: named(`WITH j AS (INSERT INTO ${S}.jobs (name, disabled, disabled_reason, disabled_at, disabled_by, disabled_until)
                             VALUES (:job, true, :reason, :since, :by, :until)
                             ON CONFLICT (name) DO UPDATE SET disabled = true, disabled_reason = :reason, disabled_at = :since,
                               disabled_by = :by, disabled_until = :until)
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
                             r.id AS running_run_id, r.started_at AS running_since, r.host AS running_host, r.pid AS running_pid,
                             l.id AS last_run_id, l.status AS last_status, l.exit_code AS last_exit_code, l.signal AS last_signal,
                             l.started_at AS last_started_at, l.finished_at AS last_finished_at, l.duration_ms AS last_duration_ms,
                             l."overlaps" AS last_overlaps,
                             s.id AS last_success_run_id, s.started_at AS last_success_at, s.duration_ms AS last_success_duration_ms,
                             (SELECT count(*) FROM ${S}.requests q WHERE q.job = n.name AND q.status = 'pending')::int AS pending_requests,
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
    // Retention (see the SQLite statements): the newest id old enough to go, then batches of
    // finished runs up to it, oldest first, each its own short transaction; rows another
    // session has locked are left for next time rather than waited for.
    // A role without DELETE is told before a DELETE fails (and the server logs an ERROR).
    pruneBound: named(`SELECT coalesce(max(id), 0) AS id,
                              has_table_privilege('${S}.runs', 'DELETE') AND has_table_privilege('${S}.requests', 'DELETE') AS may_delete
                       FROM ${S}.runs WHERE started_at < :cutoff`),
    pruneRuns: named(`DELETE FROM ${S}.runs WHERE id IN (
                        SELECT r.id FROM ${S}.runs r
                        WHERE r.id > :after AND r.id <= :bound AND r.started_at < :cutoff AND r.status <> 'running'
                          AND (:keep = 0 OR r.id < coalesce((SELECT k.id FROM ${S}.runs k WHERE k.job = r.job
                                                             ORDER BY k.id DESC OFFSET :keep - 1 LIMIT 1), 0))
                          AND NOT (r.status = 'succeeded' AND NOT EXISTS (SELECT 1 FROM ${S}.runs s WHERE s.job = r.job
                                                                         AND s.status = 'succeeded' AND s.id > r.id))
                        ORDER BY r.id LIMIT :batch FOR UPDATE SKIP LOCKED)
                      RETURNING id`),
    pruneRequests: named(`DELETE FROM ${S}.requests WHERE id IN (
                            SELECT id FROM ${S}.requests WHERE status IN ('succeeded', 'failed', 'cancelled')
                              AND coalesce(finished_at, requested_at) < :cutoff ORDER BY id LIMIT :batch FOR UPDATE SKIP LOCKED)
                          RETURNING id`),
    // Claimed only by a role that may delete what the task deletes (prune: runs and
    // requests): one without DELETE would fail at the first batch, every day, and DBAs
    // alert on the server's ERROR line.
    claimTask: named(`INSERT INTO ${S}.housekeeping AS h (task, last_at)
                      SELECT :task, now() WHERE has_table_privilege('${S}.runs', 'DELETE') AND has_table_privilege('${S}.requests', 'DELETE')
                      ON CONFLICT (task) DO UPDATE SET last_at = now() WHERE h.last_at < now() - make_interval(secs => :every_s)
                      RETURNING task`),
    releaseTask: named(`UPDATE ${S}.housekeeping SET last_at = '-infinity' WHERE task = :task`),
    get: named(`SELECT * FROM ${S}.runs WHERE id = :id`),
    tail: named(`SELECT ${LIST_COLUMNS}, right(output, :chars) AS output, coalesce(length(output) > :chars, false) AS output_cut
                 FROM ${S}.runs WHERE id = :id`),
    latest: named(`SELECT * FROM ${S}.runs WHERE job = :job ORDER BY id DESC LIMIT 1`),
  };
}

// history's filters: only those given become conditions, so each query is one the planner
// can serve from an index (a job's runs, a time range, or the newest ids).
export function listRunsStatement(S: string, filter: RunFilter): Statement {
  const where = [
    filter.jobs?.length ? 'job = ANY(:jobs::text[])' : null,
    filter.status ? 'status = :status' : null,
    filter.host ? 'host = :host' : null,
    filter.since ? 'started_at >= :since' : null,
    filter.beforeId ? 'id < :before_id' : null,
  ].filter((c) => c !== null);
  const columns = filter.withOutput ? '*' : `${LIST_COLUMNS}, NULL::text AS output`;
  return named(`SELECT ${columns} FROM ${S}.runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT :limit`);
}
