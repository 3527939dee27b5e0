// The MySQL/MariaDB statements of migrating and of the run path (GET_LOCK, admission,
// outcome, requests' claims, skips, spooled records), `?`-parameterised; D is the quoted
// database. Requests, history, status, retention and periodic tasks are in sql-reads.ts.
// Written for both servers: no RETURNING, no LATERAL, no VALUES() in ON DUPLICATE KEY UPDATE
// (deprecated in MySQL 8), no sequences; times are UTC (UTC_TIMESTAMP, never NOW(), whose
// zone is the session's).

// `name` as an identifier.
export function quoteName(name: string): string {
  return `\`${name.replaceAll('`', '``')}\``;
}

// `n` placeholders for an IN list (callers never send an empty one).
export function marks(n: number): string {
  return Array.from({ length: n }, () => '?').join(', ');
}

// A job's latest run (of a status) is one probe of these indexes. Named: with ORDER BY id
// DESC LIMIT 1, MySQL and MariaDB may pick the primary key instead and walk the whole log
// backwards for each job (stale statistics after a bulk load: 14 s for 1,000 jobs' status,
// against 0.2 s).
export const BY_ID = 'FORCE INDEX (runs_job_id)';
export const BY_STATUS = 'FORCE INDEX (runs_job_status)';

// A new run's columns, in the order runParams (rows.ts) gives their values.
export const RUN_COLUMNS = 'job, host, `trigger`, attempt, pid, username, command, started_at, tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start, slot, max_running';
const RUN_MARKS = marks(16);
// An outcome's columns, in the order outcomeParams gives them.
const OUTCOME_COLUMNS = 'status, finished_at, duration_ms, exit_code, `signal`, output, output_truncated, error';
const HOLDER = 'id, host, pid, started_at';
const ABANDONED = `CONCAT('wrapper (pid ', pid, ' on ', host, ') vanished without recording an outcome')`;
const CUT = `CONCAT('run ', r.id, ' ended without its last attempt: its wrapper vanished before it could retry or record the end')`;

// GET_LOCK around an admission and an outcome (MysqlStore.lockAndAdmit, finishRun). take:
// 1 taken now, 0 held by another session, 2 this session holds it already (GET_LOCK would
// nest, and one RELEASE_LOCK not free it). released: 1 when it was this session's.
export const LOCK_SQL = {
  // Not on a read-only server (a replica: got NULL, read_only 1), where it fences nothing.
  // (got last: the build's training server answers a SELECT's last column alone.)
  take: 'SELECT @@global.read_only AS read_only, CASE WHEN @@global.read_only THEN NULL WHEN IS_USED_LOCK(?) = CONNECTION_ID() THEN 2 ELSE GET_LOCK(?, 0) END AS got',
  release: 'DO RELEASE_LOCK(?)',
  released: 'SELECT RELEASE_LOCK(?) AS released',
  // The same, in the admission's first packet: the answer is kept in a session variable,
  // which the rest of the packet looks at (UNDER_LOCK), and which a retry of the admission
  // reads again rather than asking GET_LOCK a second time (it would answer 2).
  takeInto: 'SET @cronguard_got = CASE WHEN IS_USED_LOCK(?) = CONNECTION_ID() THEN 2 ELSE GET_LOCK(?, 0) END',
  got: 'SELECT @cronguard_got AS got',
  // After a failed admission: the name is freed if that admission took it.
  releaseTaken: 'DO IF(@cronguard_got = 1, RELEASE_LOCK(?), 0)',
  // Whether any session holds a name now (admit.ts freeLocks).
  used: 'SELECT IS_USED_LOCK(?) IS NOT NULL AS held',
} as const;

// A key that a locking read of the admission's first packet looks up (lock name, key): NULL,
// which matches no row and locks none, when the packet asked GET_LOCK (the name is not
// null) and another session holds the name. A constant for the optimizer (a user variable
// set before the statement): the lookup stays one index probe.
const UNDER_LOCK = 'IF(? IS NULL OR @cronguard_got IN (1, 2), ?, NULL)';

// Migrating the log (migrations.ts): its database, the progress table (one row per
// migration, its statements done so far: MySQL commits DDL statement by statement), and
// GET_LOCK to serialise migrators (name, seconds to wait).
export function migrationSql(D: string) {
  return {
    version: `SELECT COALESCE(MAX(version), 0) AS v FROM ${D}.schema_migrations WHERE complete`,
    lock: 'SELECT GET_LOCK(?, ?) AS got',
    unlock: 'DO RELEASE_LOCK(?)',
    databaseSeen: 'SELECT COUNT(*) AS n FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?',
    createDatabase: `CREATE DATABASE IF NOT EXISTS ${D} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
    createTable: `CREATE TABLE IF NOT EXISTS ${D}.schema_migrations (
                    version    INT         NOT NULL PRIMARY KEY,
                    steps      INT         NOT NULL DEFAULT 0,
                    complete   BOOLEAN     NOT NULL DEFAULT FALSE,
                    applied_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
                  ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
    progress: `SELECT version, steps, complete FROM ${D}.schema_migrations`,
    begin: `INSERT INTO ${D}.schema_migrations (version) VALUES (?)`,
    step: `UPDATE ${D}.schema_migrations SET steps = ? WHERE version = ?`,
    complete: `UPDATE ${D}.schema_migrations SET complete = TRUE, applied_at = UTC_TIMESTAMP(6) WHERE version = ?`,
  };
}

export function runSql(D: string) {
  return {
    // The admission's first statement: the job's row, made if missing and locked (an upsert
    // takes the row's exclusive lock at once; a plain SELECT ... FOR UPDATE after INSERT
    // IGNORE would hold a shared lock first, and two admissions upgrading theirs deadlock).
    // Everything the admission reads after it sees what the previous one committed.
    lockJob: `INSERT INTO ${D}.jobs (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name`,
    // The moment the run got its lock, on the server's clock (its started_at), asked right
    // after GET_LOCK in the same packet; to the millisecond, as the run keeps it.
    lockedAt: 'SELECT UTC_TIMESTAMP(3) AS now',
    // The job's row, locked (lock name, job; see UNDER_LOCK). Missing on a job's first run:
    // the admission then makes it with lockJob and reads again.
    // Its own pause holds while disabled_until is NULL or to come.
    jobRow: `SELECT disabled AND (disabled_until IS NULL OR disabled_until > UTC_TIMESTAMP(6)) AS disabled, disabled_reason AS reason,
                    disabled_at AS since, disabled_by AS \`by\`, disabled_until AS \`until\`, tick, tick_host, schedule,
                    unscheduled_said_at AS said
             FROM ${D}.jobs WHERE name = ${UNDER_LOCK} FOR UPDATE`,
    // The fleet's row, under a shared lock, in the admission's first packet: a pause (an
    // UPDATE of it) waits for the admissions under way, so a drain after it sees their runs.
    admissionFleet: `SELECT paused AND (until_at IS NULL OR until_at > UTC_TIMESTAMP(6)) AS held, reason, paused_at AS since, paused_by AS \`by\`, until_at AS \`until\`
                     FROM ${D}.fleet_pause WHERE id = 1 LOCK IN SHARE MODE`,
    // The job's runs still `running`, and finished runs whose claims still are (job, job);
    // with when each started and its --max-running, for a refusal of copies that disagree.
    unsettled: `SELECT id, status, host, pid, wrapper_start, lock_backend, lock_key, started_at, max_running FROM ${D}.runs WHERE job = ? AND status = 'running'
                UNION SELECT r.id, r.status, r.host, r.pid, r.wrapper_start, r.lock_backend, r.lock_key, r.started_at, r.max_running
                FROM ${D}.requests q JOIN ${D}.runs r ON r.id = q.run_id WHERE q.job = ? AND q.status = 'running'`,
    abandon: (n: number) => `UPDATE ${D}.runs SET status = 'abandoned', finished_at = UTC_TIMESTAMP(6), error = ${ABANDONED}
                             WHERE id IN (${marks(n)}) AND status = 'running'`,
    failRequestsOf: (n: number) => `UPDATE ${D}.requests SET status = 'failed', finished_at = UTC_TIMESTAMP(6)
                                    WHERE run_id IN (${marks(n)}) AND status = 'running'`,
    // Claims of finished runs whose wrapper is gone: back to `pending` when the command never
    // started (no child pid), else `failed` with the last exit code and why (as PostgreSQL's
    // settle_claims_of()).
    claimsUnstarted: (n: number) => `UPDATE ${D}.requests q JOIN ${D}.runs r ON r.id = q.run_id
                                     SET q.status = 'pending', q.run_id = NULL, q.claimed_at = NULL, q.attempts = GREATEST(q.attempts - 1, 0)
                                     WHERE q.run_id IN (${marks(n)}) AND q.status = 'running' AND r.child_pid IS NULL`,
    claimsCut: (n: number) => `UPDATE ${D}.requests q JOIN ${D}.runs r ON r.id = q.run_id
                               SET q.status = 'failed', q.finished_at = UTC_TIMESTAMP(6), q.exit_code = r.exit_code, q.error = ${CUT}
                               WHERE q.run_id IN (${marks(n)}) AND q.status = 'running'`,
    // Due requests, oldest first (lock name, job); SKIP LOCKED: a claimer never waits for another's.
    dueRequests: `SELECT id, args FROM ${D}.requests WHERE job = ${UNDER_LOCK} AND status = 'pending' AND not_before <= UTC_TIMESTAMP(6)
                  ORDER BY id FOR UPDATE SKIP LOCKED`,
    // The alert state (wantAlert, alertSent; migration 0008), once the job's row exists
    // (lockJob): the outcome wanted (failing, run, job); the claim of a delivery (token, ms,
    // job), taken (one row changed) only while none is under way and the wanted state is not
    // the one delivered, then read (job, token); the delivered state (failing, job, token), set
    // and the claim freed by its holder alone.
    alertWanted: `UPDATE ${D}.jobs SET alert_failing = ?, alert_run = ? WHERE name = ?`,
    alertClaim: `UPDATE ${D}.jobs SET alert_claim = ?, alert_claimed_until = UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND
                 WHERE name = ? AND (alert_claim IS NULL OR alert_claimed_until < UTC_TIMESTAMP(6))
                   AND alert_failing IS NOT NULL AND alert_failing <> (alerted_at IS NOT NULL)`,
    alertClaimed: `SELECT alert_failing AS failing, alert_run AS run_id FROM ${D}.jobs WHERE name = ? AND alert_claim = ?`,
    alertDelivered: `UPDATE ${D}.jobs SET alerted_at = CASE WHEN ? THEN coalesce(alerted_at, UTC_TIMESTAMP(6)) END, alert_claim = NULL
                     WHERE name = ? AND alert_claim = ?`,
    alertFreed: `UPDATE ${D}.jobs SET alert_claim = NULL WHERE name = ? AND alert_claim = ?`,
    // A run of --scheduled said that the job has no schedule (when, job): once a day.
    saidUnscheduled: `UPDATE ${D}.jobs SET unscheduled_said_at = ? WHERE name = ?`,
    // The latest run by id, not max(started_at): one index probe however long the log.
    lastStart: `SELECT started_at AS at FROM ${D}.runs ${BY_ID} WHERE job = ? AND status <> 'abandoned' ORDER BY id DESC LIMIT 1`,
    // Whether the job's claimed tick (job, tick, tick_host) was served: by a run that started
    // its command or still may.
    tickServed: `SELECT 1 AS served FROM ${D}.runs WHERE job = ? AND tick = ? AND host = ? AND (status = 'running' OR child_pid IS NOT NULL) LIMIT 1`,
    // The ticks of a job's slots past the first (job, N; see migration 0010). A plain read:
    // the job's row, locked before it, is what lines up their writers, and a locking read of
    // a missing row would take a gap lock that two admissions, each then inserting, deadlock on.
    slotTicks: `SELECT slot, tick, tick_host FROM ${D}.slot_ticks WHERE job = ? AND slot < ?`,
    // A slot's tick claimed (job, slot, tick, host, and again).
    claimSlotTick: `INSERT INTO ${D}.slot_ticks (job, slot, tick, tick_host) VALUES (?, ?, ?, ?)
                    ON DUPLICATE KEY UPDATE tick = ?, tick_host = ?`,
    // The run of another host that had this tick (job, tick, ahead, host).
    tickHolder: `SELECT ${HOLDER} FROM ${D}.runs FORCE INDEX (runs_job_tick) WHERE job = ? AND tick >= ? AND tick <= ? AND host <> ? ORDER BY id DESC LIMIT 1`,
    insertRun: `INSERT INTO ${D}.runs (status, overlaps, request_id, ${RUN_COLUMNS}) VALUES ('running', 0, ?, ${RUN_MARKS})`,
    // The requests the run inserted just before serves (in the same packet: its id is LAST_INSERT_ID()).
    claim: (n: number) => `UPDATE ${D}.requests SET status = 'running', claimed_at = UTC_TIMESTAMP(6), attempts = attempts + 1,
                             run_id = LAST_INSERT_ID()
                           WHERE id IN (${marks(n)}) AND status = 'pending'`,
    // The job as its latest admitted run saw it, and the tick it claimed (null: unchanged).
    register: `UPDATE ${D}.jobs SET command = ?, host = ?, min_interval_ms = ?, last_seen_at = ?,
                 tick = COALESCE(?, tick), tick_host = COALESCE(?, tick_host)
               WHERE name = ?`,
    // Skips: the run holding the lock (running; on one host for a local lock), else the
    // latest run of the wrapper that took a local lock (job, host, pid); else parked on the
    // job, for its holder's outcome to fold in.
    // With its --max-running: a copy given another N is refused as a disagreement.
    // The job's newest running copy, with its --max-running and what tells whether it may
    // still run (admit.ts heldDisagreement).
    runningHolder: `SELECT ${HOLDER}, max_running, status, wrapper_start, lock_backend, lock_key FROM ${D}.runs ${BY_STATUS}
                    WHERE job = ? AND status = 'running' ORDER BY id DESC LIMIT 1`,
    runningHolderOn: `SELECT ${HOLDER} FROM ${D}.runs ${BY_STATUS} WHERE job = ? AND status = 'running' AND host = ? ORDER BY id DESC LIMIT 1`,
    pidHolder: `SELECT ${HOLDER} FROM ${D}.runs WHERE job = ? AND host = ? AND pid = ? ORDER BY id DESC LIMIT 1`,
    countSkip: `UPDATE ${D}.runs SET overlaps = overlaps + 1 WHERE id = ?`,
    park: `INSERT INTO ${D}.jobs (name, pending_overlaps) VALUES (?, 1) ON DUPLICATE KEY UPDATE pending_overlaps = pending_overlaps + 1`,
    // A loop's hold of the lock between runs (job, host, pid, until, lock, key, and again).
    holding: `INSERT INTO ${D}.jobs (name, holding_host, holding_pid, holding_until, holding_lock, holding_key) VALUES (?, ?, ?, ?, ?, ?)
              ON DUPLICATE KEY UPDATE holding_host = ?, holding_pid = ?, holding_until = ?, holding_lock = ?, holding_key = ?`,
    blocked: `INSERT INTO ${D}.jobs (name, blocked_by, blocked_at) VALUES (?, ?, UTC_TIMESTAMP(6))
              ON DUPLICATE KEY UPDATE blocked_by = ?, blocked_at = UTC_TIMESTAMP(6)`,
    setChildPid: `UPDATE ${D}.runs SET child_pid = ?, command = ? WHERE id = ?`,
    // Stops (migration 0005): asked of a running run only; the latest request wins
    // (signal, by, id, then signal, by again).
    requestStop: `INSERT INTO ${D}.stop_requests (run_id, \`signal\`, requested_by, requested_at)
                  SELECT id, ?, ?, UTC_TIMESTAMP(6) FROM ${D}.runs WHERE id = ? AND (status = 'running' OR ?)
                  ON DUPLICATE KEY UPDATE \`signal\` = ?, requested_by = ?, requested_at = UTC_TIMESTAMP(6)`,
    stopRequest: `SELECT \`signal\`, requested_by AS \`by\` FROM ${D}.stop_requests WHERE run_id = ?`,
    amendError: `UPDATE ${D}.runs SET error = ? WHERE id = ? AND status <> 'running' AND (error IS NULL OR error NOT LIKE 'replaced by run %')`,
    // The outcome's first statement: the run and its job's parked skips, both locked, so a
    // skip parked meanwhile waits and is read as committed (PostgreSQL 0016): what is read
    // is what is zeroed. `claims`: whether requests wait for its end.
    finishLock: `SELECT r.job, r.status, COALESCE(j.pending_overlaps, 0) AS parked,
                        EXISTS (SELECT 1 FROM ${D}.requests q WHERE q.run_id = r.id AND q.status = 'running') AS claims
                 FROM ${D}.runs r LEFT JOIN ${D}.jobs j ON j.name = r.job
                 WHERE r.id = ? FOR UPDATE`,
    unpark: `UPDATE ${D}.jobs SET pending_overlaps = 0 WHERE name = ?`,
    finish: `UPDATE ${D}.runs SET status = ?, finished_at = ?, duration_ms = ?, exit_code = ?, \`signal\` = ?, output = ?, output_truncated = ?,
               error = ?, overlaps = overlaps + ?
             WHERE id = ?`,
    finishRequests: `UPDATE ${D}.requests SET status = ?, finished_at = ?, exit_code = ? WHERE run_id = ? AND status = 'running'`,
    // run_counts, as PostgreSQL's trigger keeps it: a finished status counted (job, status, n, n).
    count: `INSERT INTO ${D}.run_counts (job, status, n) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE n = n + ?`,
    uncount: `UPDATE ${D}.run_counts SET n = n - 1 WHERE job = ? AND status = ?`,
    // Requests a run gives back: to wait for the next run, or failed without running.
    requestsLater: (n: number) => `UPDATE ${D}.requests SET status = 'pending', run_id = NULL, claimed_at = NULL, attempts = GREATEST(attempts - 1, 0)
                                   WHERE run_id = ? AND status = 'running' AND id IN (${marks(n)})`,
    // A request of the run ended before the run (status, exit code, error, id, run).
    settleRequest: `UPDATE ${D}.requests SET status = ?, finished_at = UTC_TIMESTAMP(6), exit_code = ?, error = ? WHERE id = ? AND run_id = ? AND status = 'running'`,
    requestsRefused: (n: number) => `UPDATE ${D}.requests SET status = 'failed', run_id = NULL, finished_at = UTC_TIMESTAMP(6), error = ?
                                     WHERE run_id = ? AND status = 'running' AND id IN (${marks(n)})`,
    // A retry: a new row, which the requests of the previous one follow.
    firstRequestOf: `SELECT MIN(id) AS id FROM ${D}.requests WHERE run_id = ?`,
    moveRequests: `UPDATE ${D}.requests SET run_id = ?, attempts = attempts + 1 WHERE run_id = ? AND status = 'running'`,
    // A spooled record: the row its run key names (locked), a new one, or the same run's
    // row brought up to date.
    keyRow: `SELECT id, job, host, pid, invoked_at, status FROM ${D}.runs WHERE run_key = ? FOR UPDATE`,
    // Whether the log holds this run (the spool's witness, see Spool).
    holdsRun: `SELECT 1 AS held FROM ${D}.runs WHERE run_key = ?`,
    importRun: `INSERT INTO ${D}.runs (${RUN_COLUMNS}, child_pid, ${OUTCOME_COLUMNS}) VALUES (${RUN_MARKS}, ?, ${marks(8)})`,
    importOutcome: `UPDATE ${D}.runs SET child_pid = COALESCE(?, child_pid), status = ?, finished_at = ?, duration_ms = ?, exit_code = ?,
                      \`signal\` = ?, output = ?, output_truncated = ?, error = ?
                    WHERE id = ?`,
    ensureJob: `INSERT INTO ${D}.jobs (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name`,
    // A delivered record's claims (see claimsOf): those its command was never given go back
    // to `pending`; on its last attempt, those it served end with it, linked to this attempt.
    claimsNotServed: (served: number) => `UPDATE ${D}.requests SET status = 'pending', run_id = NULL, claimed_at = NULL,
                                            attempts = GREATEST(attempts - 1, 0)
                                          WHERE run_id = ? AND status = 'running'${served > 0 ? ` AND id NOT IN (${marks(served)})` : ''}`,
    // Leases (migration 0002), taken in the admission's transaction under the job's row lock
    // (lease-admit.ts). Whether the key's row is live (unexpired on the server's clock), read
    // without a lock; then, by a taker that holds the epoch counter, locked (or, when there is
    // no row, the gap where it would go: a DBA's INSERT waits for this transaction).
    leaseLive: `SELECT expires_at > UTC_TIMESTAMP(6) AS live FROM ${D}.leases WHERE lock_key = ?`,
    leaseRow: `SELECT expires_at > UTC_TIMESTAMP(6) AS live FROM ${D}.leases WHERE lock_key = ? FOR UPDATE`,
    // Whether a lease is held now, by whoever (key): its newest renewal, by a locking read.
    leaseHeld: `SELECT expires_at > UTC_TIMESTAMP(6) AS held FROM ${D}.leases WHERE lock_key = ? LOCK IN SHARE MODE`,
    // A new epoch, read back as LAST_INSERT_ID() by the statement that takes the lease. The
    // counter's row stays locked to the commit: takers of all keys go one at a time.
    drawEpoch: `UPDATE ${D}.lease_epochs SET epoch = LAST_INSERT_ID(epoch + 1) WHERE id = 1`,
    // Taking it: a new row (key, job, host, pid, ttl, ttl in ms for the expiry), or the
    // expired one's (job, host, pid, ttl, ttl, key); both report the epoch drawn.
    insertLease: `INSERT INTO ${D}.leases (lock_key, job, host, pid, epoch, ttl_ms, expires_at)
                  VALUES (?, ?, ?, ?, LAST_INSERT_ID(), ?, UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND)`,
    retakeLease: `UPDATE ${D}.leases SET job = ?, host = ?, pid = ?, run_id = NULL, epoch = LAST_INSERT_ID(), ttl_ms = ?,
                    acquired_at = UTC_TIMESTAMP(6), renewed_at = UTC_TIMESTAMP(6), expires_at = UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND
                  WHERE lock_key = ? AND expires_at <= UTC_TIMESTAMP(6)`,
    // With the moment it was taken (the run's started_at, as lockedAt).
    takenEpoch: 'SELECT CAST(LAST_INSERT_ID() AS CHAR) AS epoch, UTC_TIMESTAMP(3) AS now',
    // The run admitted under it (run, key, epoch).
    leaseRun: `UPDATE ${D}.leases SET run_id = ? WHERE lock_key = ? AND epoch = ?`,
    // A renewal (ttl in ms, key, epoch): only by its holder (the epoch it took) and only while
    // unexpired on the server's clock, over any connection; no row: the lease is lost.
    renewLease: `UPDATE ${D}.leases SET renewed_at = UTC_TIMESTAMP(6), expires_at = UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND
                 WHERE lock_key = ? AND epoch = ? AND expires_at > UTC_TIMESTAMP(6)`,
    // Let go (key, epoch): by the outcome, in its transaction, or without one.
    releaseLease: `DELETE FROM ${D}.leases WHERE lock_key = ? AND epoch = ?`,
    claimsServed: (n: number) => `UPDATE ${D}.requests SET status = ?, finished_at = ?, exit_code = ?, run_id = ?
                                  WHERE id IN (${marks(n)}) AND status = 'running'`,
  };
}

export type RunSql = ReturnType<typeof runSql>;
