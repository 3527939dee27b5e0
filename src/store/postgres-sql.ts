// Every PostgreSQL statement of the run log, parameterised; S is the quoted schema.

const ABANDONED = `'wrapper (pid ' || pid || ' on ' || host || ') vanished without recording an outcome'`;

// A new run's columns and parameters, $1 to $11 in every statement that inserts one.
export const RUN_COLUMNS = 'job, host, trigger, attempt, pid, username, command, started_at, tick, lock_backend, lock_key';
const RUN_VALUES = '$1, $2, $3, $4, $5, $6, $7, $8, $9::timestamptz, $10, $11';

// The fleet rule ($12: apply it; $13: the claimer's current minute): claim the run's tick
// on the job's row. The upsert locks that row, so of two hosts claiming one tick at once
// exactly one wins. Ticks only move forward: a waiter (-w) of a minute that another host
// has served, or that a later minute has overtaken, does not run. The same host may always
// claim again (a script that runs a job twice a minute runs it twice; one host is left to
// its lock). A claimed tick later than the claimer's own clock allows came from a host whose
// clock runs ahead, and must not silence the fleet until real time catches up.
const claimTick = (S: string, when: string) => `
  claim AS (INSERT INTO ${S}.jobs AS j (name, tick, tick_host) SELECT $1, $9::timestamptz, $2
            WHERE ${when} AND $12 AND $9::timestamptz IS NOT NULL
            ON CONFLICT (name) DO UPDATE
            SET tick = CASE WHEN j.tick > ${AHEAD} THEN excluded.tick ELSE greatest(j.tick, excluded.tick) END,
                tick_host = excluded.tick_host
            WHERE j.tick IS NULL OR excluded.tick > j.tick OR j.tick_host = excluded.tick_host OR j.tick > ${AHEAD}
            RETURNING 1)`;
const AHEAD = `$13::timestamptz + interval '1 minute'`;
const TICK_FREE = `(NOT ($12 AND $9::timestamptz IS NOT NULL) OR EXISTS (SELECT 1 FROM claim))`;
// Counts the skip on the run of another host that served (or overtook) the tick, and names
// it for -v. When that run's row is not visible yet (its statement is still committing),
// the skip is parked on the job instead (see finish).
const tickSkip = (S: string, when: string) => `
  tick_skip AS (UPDATE ${S}.runs SET "overlaps" = "overlaps" + 1
                WHERE id = (SELECT id FROM ${S}.runs
                            WHERE job = $1 AND tick >= $9::timestamptz AND tick <= ${AHEAD} AND host <> $2
                            ORDER BY id DESC LIMIT 1) AND ${when}
                RETURNING id, host, pid, started_at)`;
const parkSkip = (S: string, when: string) => `
  parked AS (INSERT INTO ${S}.jobs (name, pending_overlaps) SELECT $1, 1 WHERE ${when}
             ON CONFLICT (name) DO UPDATE SET pending_overlaps = ${S}.jobs.pending_overlaps + 1
             RETURNING 1)`;

export function statements(S: string) {
  return {
    // Local lock + shared log: admit and insert, returning this host's other running rows
    // (their wrappers' liveness is checked here, then `abandon`).
    admit: `WITH ${claimTick(S, 'true')},
                 ok AS (SELECT ${TICK_FREE} AS run),
                 ${tickSkip(S, 'NOT (SELECT run FROM ok)')},
                 ${parkSkip(S, 'NOT (SELECT run FROM ok) AND NOT EXISTS (SELECT 1 FROM tick_skip)')},
                 running AS (SELECT id, pid FROM ${S}.runs
                             WHERE job = $1 AND host = $2 AND status = 'running' AND (SELECT run FROM ok)),
                 ins AS (INSERT INTO ${S}.runs (status, ${RUN_COLUMNS}) SELECT 'running', ${RUN_VALUES}
                         WHERE (SELECT run FROM ok) RETURNING id)
            SELECT (SELECT id FROM ins) AS id,
                   (SELECT coalesce(json_agg(json_build_object('id', id, 'pid', pid)), '[]') FROM running) AS running,
                   (SELECT row_to_json(t) FROM tick_skip t) AS holder,
                   (SELECT count(*) FROM parked) AS parked,
                   (SELECT max(version) FROM ${S}.schema_migrations) AS version`,
    // The postgres lock ($14), the fleet rule and the record in one round trip. Holding the
    // cluster-wide lock proves every other `running` row of the job stale. A lock taken for
    // a tick already served elsewhere is given back at once. $15: count a skip for a held
    // lock (a -w waiter counts only when it gives up).
    lockAndAdmit: `WITH l AS (SELECT pg_try_advisory_lock($14::bigint) AS got),
                 ${claimTick(S, '(SELECT got FROM l)')},
                 ok AS (SELECT (SELECT got FROM l) AND ${TICK_FREE} AS run),
                 abandoned AS (UPDATE ${S}.runs SET status = 'abandoned', finished_at = now(), error = ${ABANDONED}
                               WHERE job = $1 AND status = 'running' AND (SELECT run FROM ok) RETURNING id),
                 ins AS (INSERT INTO ${S}.runs (status, ${RUN_COLUMNS}) SELECT 'running', ${RUN_VALUES}
                         WHERE (SELECT run FROM ok) RETURNING id),
                 unlocked AS (SELECT pg_advisory_unlock($14::bigint) WHERE (SELECT got FROM l) AND NOT (SELECT run FROM ok)),
                 ${tickSkip(S, '(SELECT got FROM l) AND NOT (SELECT run FROM ok)')},
                 holder AS (SELECT id, host, pid, started_at FROM ${S}.runs
                            WHERE job = $1 AND status = 'running' AND NOT (SELECT got FROM l) ORDER BY id DESC LIMIT 1),
                 overlap AS (UPDATE ${S}.runs SET "overlaps" = "overlaps" + 1
                             WHERE id = (SELECT id FROM holder) AND $15 RETURNING id),
                 ${parkSkip(S, `((NOT (SELECT got FROM l) AND $15 AND NOT EXISTS (SELECT 1 FROM overlap))
                                 OR ((SELECT got FROM l) AND NOT (SELECT run FROM ok) AND NOT EXISTS (SELECT 1 FROM tick_skip)))`)}
            SELECT (SELECT got FROM l) AS got, (SELECT id FROM ins) AS id,
                   (SELECT count(*) FROM abandoned) + (SELECT count(*) FROM parked) + (SELECT count(*) FROM unlocked) AS touched,
                   coalesce((SELECT row_to_json(t) FROM tick_skip t), (SELECT row_to_json(h) FROM holder h)) AS holder,
                   (SELECT max(version) FROM ${S}.schema_migrations) AS version`,
    abandon: `UPDATE ${S}.runs SET status = 'abandoned', finished_at = now(), error = ${ABANDONED}
              WHERE id = ANY($1::bigint[]) AND status = 'running'`,
    setChildPid: `UPDATE ${S}.runs SET child_pid = $2 WHERE id = $1`,
    // Skips that could not see this run's row yet were parked on the job; fold them in.
    finish: `WITH claimed AS (UPDATE ${S}.jobs j SET pending_overlaps = 0 FROM ${S}.jobs old
                              WHERE j.name = (SELECT job FROM ${S}.runs WHERE id = $1) AND old.name = j.name
                                AND old.pending_overlaps > 0
                              RETURNING old.pending_overlaps AS n)
             UPDATE ${S}.runs SET status = $2, finished_at = $3, duration_ms = $4, exit_code = $5, signal = $6,
                    output = $7, output_truncated = $8, error = $9,
                    "overlaps" = "overlaps" + coalesce((SELECT n FROM claimed), 0)
             WHERE id = $1`,
    overlap: `WITH o AS (UPDATE ${S}.runs SET "overlaps" = "overlaps" + 1
                         WHERE id = (SELECT max(id) FROM ${S}.runs
                                     WHERE job = $1 AND status = 'running' AND ($2::text IS NULL OR host = $2))
                         RETURNING id, host, pid, started_at),
                   p AS (INSERT INTO ${S}.jobs (name, pending_overlaps) SELECT $1, 1 WHERE NOT EXISTS (SELECT 1 FROM o)
                         ON CONFLICT (name) DO UPDATE SET pending_overlaps = ${S}.jobs.pending_overlaps + 1)
              SELECT id, host, pid, started_at FROM o`,
    unlock: 'SELECT pg_advisory_unlock($1::bigint)',
    importUpdate: `UPDATE ${S}.runs SET child_pid = coalesce($2, child_pid), status = $3, finished_at = $4,
                     duration_ms = $5, exit_code = $6, signal = $7, output = $8, output_truncated = $9, error = $10
                   WHERE id = $1`,
    importInsert: `INSERT INTO ${S}.runs (${RUN_COLUMNS}, child_pid,
                     status, finished_at, duration_ms, exit_code, signal, output, output_truncated, error)
                   VALUES (${RUN_VALUES}, $12, $13, $14, $15, $16, $17, $18, $19, $20) RETURNING id`,
    // Advisory locks held right now by cronguard sessions; a bigint key is split into
    // classid (high 32 bits) and objid (low 32 bits).
    advisoryLocks: `SELECT substr(a.application_name, 11) AS job, a.pid AS backend_pid,
                           coalesce(host(a.client_addr), 'local') AS client,
                           ((l.classid::bigint << 32) | l.objid::bigint)::text AS key, a.backend_start
                    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                      AND a.application_name LIKE 'cronguard:%'`,
    list: `SELECT * FROM ${S}.runs WHERE ($1::text IS NULL OR job = $1) AND ($2::text IS NULL OR status = $2)
           ORDER BY id DESC LIMIT $3`,
    get: `SELECT * FROM ${S}.runs WHERE id = $1`,
    latest: `SELECT * FROM ${S}.runs WHERE job = $1 ORDER BY id DESC LIMIT 1`,
  };
}
