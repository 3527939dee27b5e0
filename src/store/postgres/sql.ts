import type { RunFilter } from '../types.js';
import { advisoryHeld, BACKEND_START } from './lock.js';
import { named, type Statement } from './named-params.js';
import { jobStatements } from './sql-jobs.js';

// Every PostgreSQL statement of the run log, parameterised (see named-params.ts); S is the
// quoted schema.

// The server's identity: the same on a physical standby and after its promotion.
const SYSTEM_IDENTIFIER = 'SELECT system_identifier::text FROM pg_catalog.pg_control_system()';

const ABANDONED = `'wrapper (pid ' || pid || ' on ' || host || ') vanished without recording an outcome'`;

// A new run's columns and their parameters.
const RUN_COLUMNS = 'job, host, trigger, attempt, pid, username, command, started_at, tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start, slot, max_running';
const RUN_VALUES = `:job, :host, :trigger, :attempt, :pid, :username, :command, :started_at, :tick::timestamptz, :lock_backend,
                    :lock_key, :run_key, :invoked_at, :wrapper_start, :slot::integer, :max_running::integer`;
// A run's columns but its output, which lists never read.
const LIST_COLUMNS = `id, job, status, trigger, attempt, host, pid, child_pid, username, command, started_at, finished_at, duration_ms,
                      exit_code, signal, output_truncated, "overlaps", request_id, error,
                      tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start, slot, max_running`;

export function statements(S: string) {
  return {
    // The admission of one run (migration 0005): one round trip, under the postgres lock
    // (when :p has a key) or a local one, after the claims of runs that ended are settled
    // (0011; `orphaned`: this host's such runs the lock does not prove ended), guarded for
    // poolers (0013: `reentered`, `backend`, `holding`; 0027: not on the backend this session
    // started), taking a lease (0014: `epoch`), stamping
    // the start when the lock is taken, on the server's clock (0023: `started_at`). It also names the server
    // (pg_control_system(), executable by PUBLIC): the spool's key after a failover (see
    // Spool), at no round trip of its own.
    admit: named(`SELECT a->'r' AS r, a->'orphaned' AS orphaned, (a->>'backend')::integer AS backend, coalesce((a->>'holding')::boolean, false) AS holding,
                         a->>'epoch' AS epoch, (a->>'started_at')::timestamptz AS started_at,
                         ${BACKEND_START} AS backend_start, (${SYSTEM_IDENTIFIER}) AS system_identifier
                  FROM ${S}.admit(:p::jsonb, true) AS a`),
    systemIdentifier: named(SYSTEM_IDENTIFIER),
    // Whether the log holds this run (the spool's witness, see Spool): one index probe.
    holdsRun: named(`SELECT 1 FROM ${S}.runs WHERE run_key = :run_key`),
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
    amendError: named(`UPDATE ${S}.runs SET error = :error WHERE id = :id AND status <> 'running' AND (error IS NULL OR error NOT LIKE 'replaced by run %')`),
    // A run's outcome (finish(), migration 0013). With :unlock, the advisory lock goes in the
    // same round trip, once the row is updated: whoever takes the lock next waits for this
    // row, and finds it finished. Only on the server backend that took it (:backend): any
    // other may hold the key for another client of a pooler.
    finish: named(`SELECT CASE WHEN f.done AND :unlock::bigint IS NOT NULL AND pg_backend_pid() = :backend::integer
                                 AND ${advisoryHeld(':unlock::bigint', 'pg_backend_pid()')}
                               THEN pg_advisory_unlock(:unlock::bigint) ELSE false END AS unlocked
                   FROM ${S}.finish(:p::jsonb) AS f(done)`),
    // The same on the server backend this session started, which took the lock: no other
    // client shares it, so it holds the lock until this session lets it go, and pg_locks (a
    // look at every backend's locks, the larger part of this statement's work) is not asked.
    finishOnOwnBackend: named(`SELECT CASE WHEN f.done AND :unlock::bigint IS NOT NULL AND pg_backend_pid() = :backend::integer
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
    // A request of the run ended before the run (a batch's results by argument), from arrays
    // of the same length (ids, statuses, exit codes, errors).
    settleRequests: named(`UPDATE ${S}.requests q SET status = s.status, finished_at = now(), exit_code = s.exit_code, error = s.error
                           FROM unnest(:ids::bigint[], :statuses::text[], :exit_codes::integer[], :errors::text[]) AS s(id, status, exit_code, error)
                           WHERE q.id = s.id AND q.run_id = :run_id AND q.status = 'running'`),
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
    holding: named(`INSERT INTO ${S}.jobs (name, holding_host, holding_pid, holding_until, holding_lock, holding_key)
                    VALUES (:job, :host, :pid, :until, :lock, :key)
                    ON CONFLICT (name) DO UPDATE SET holding_host = :host, holding_pid = :pid, holding_until = :until, holding_lock = :lock, holding_key = :key`),
    blocked: named(`INSERT INTO ${S}.jobs (name, blocked_by, blocked_at) VALUES (:job, :by, now())
                    ON CONFLICT (name) DO UPDATE SET blocked_by = :by, blocked_at = now()`),
    // A run written while the log was out of reach, or one that never started: one row per
    // run key, however often it is delivered, and whether or not its start got through. A key
    // that names another run's row (not the same job, host, pid and invocation; not the start,
    // which the server stamps) changes nothing, and neither does an `abandoned` guessed from an
    // old record of a run that did finish.
    importRun: named(`INSERT INTO ${S}.runs AS r (${RUN_COLUMNS}, child_pid, status, finished_at, duration_ms, exit_code, signal,
                        output, output_truncated, error)
                      VALUES (${RUN_VALUES}, :child_pid, :status, :finished_at, :duration_ms, :exit_code, :signal, :output,
                        :output_truncated, :error)
                      ON CONFLICT (run_key) DO UPDATE SET child_pid = coalesce(excluded.child_pid, r.child_pid),
                        status = excluded.status, finished_at = excluded.finished_at, duration_ms = excluded.duration_ms,
                        exit_code = excluded.exit_code, signal = excluded.signal, output = excluded.output,
                        output_truncated = excluded.output_truncated, error = excluded.error
                      WHERE r.job = excluded.job AND r.host = excluded.host AND r.pid = excluded.pid
                        AND r.invoked_at = excluded.invoked_at
                        AND (excluded.status <> 'abandoned' OR r.status IN ('running', 'abandoned'))
                      RETURNING id`),
    // The row a run key names, and whether it is this run's (importRun changed nothing).
    keyOwner: named(`SELECT id, (job = :job AND host = :host AND pid = :pid AND invoked_at = :invoked_at) AS same
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
    ...jobStatements(S),
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
    filter.slot !== undefined ? 'coalesce(slot, 0) = :slot' : null,
    filter.since ? 'started_at >= :since' : null,
    filter.beforeId ? 'id < :before_id' : null,
  ].filter((c) => c !== null);
  const columns = filter.withOutput ? '*' : `${LIST_COLUMNS}, NULL::text AS output`;
  return named(`SELECT ${columns} FROM ${S}.runs ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT :limit`);
}
