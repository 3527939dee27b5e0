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

const ABANDONED = `'wrapper (pid ' || pid || ' on ' || host || ') vanished without recording an outcome'`;

// A new run's columns and their parameters.
const RUN_COLUMNS = 'job, host, trigger, attempt, pid, username, command, started_at, tick, lock_backend, lock_key, run_key, invoked_at, wrapper_start';
const RUN_VALUES = `:job, :host, :trigger, :attempt, :pid, :username, :command, :started_at, :tick::timestamptz, :lock_backend,
                    :lock_key, :run_key, :invoked_at, :wrapper_start`;
const FINISH = 'status = :status, finished_at = :finished_at, duration_ms = :duration_ms, exit_code = :exit_code, signal = :signal, output = :output, output_truncated = :output_truncated, error = :error';

// The fleet rule (:fleet: apply it; :now: the claimer's current minute): claim the run's
// tick on the job's row. The upsert locks that row, so of two hosts claiming one tick at once
// exactly one wins. Ticks only move forward: a waiter (-w) of a minute that another host has
// served, or that a later minute has overtaken, does not run. The same host may always claim
// again (a script that runs a job twice a minute runs it twice; one host is left to its
// lock). A claimed tick later than the claimer's own clock allows came from a host whose
// clock runs ahead, and must not silence the fleet until real time catches up.
const AHEAD = `:now::timestamptz + interval '1 minute'`;
const claimTick = (S: string, when: string) => `
  claim AS (INSERT INTO ${S}.jobs AS j (name, tick, tick_host) SELECT :job, :tick::timestamptz, :host
            WHERE ${when} AND :fleet AND :tick::timestamptz IS NOT NULL
            ON CONFLICT (name) DO UPDATE
            SET tick = CASE WHEN j.tick > ${AHEAD} THEN excluded.tick ELSE greatest(j.tick, excluded.tick) END,
                tick_host = excluded.tick_host
            WHERE j.tick IS NULL OR excluded.tick > j.tick OR j.tick_host = excluded.tick_host OR j.tick > ${AHEAD}
            RETURNING 1)`;
const TICK_FREE = `(NOT (:fleet AND :tick::timestamptz IS NOT NULL) OR EXISTS (SELECT 1 FROM claim))`;
// Counts the skip on the run of another host that served (or overtook) the tick, and names
// it for -v. When that run's row is not visible yet (its statement is still committing),
// the skip is parked on the job instead (see finish).
const tickSkip = (S: string, when: string) => `
  tick_skip AS (UPDATE ${S}.runs SET "overlaps" = "overlaps" + 1
                WHERE id = (SELECT id FROM ${S}.runs
                            WHERE job = :job AND tick >= :tick::timestamptz AND tick <= ${AHEAD} AND host <> :host
                            ORDER BY id DESC LIMIT 1) AND ${when}
                RETURNING id, host, pid, started_at)`;
const parkSkip = (S: string, when: string) => `
  parked AS (INSERT INTO ${S}.jobs (name, pending_overlaps) SELECT :job, 1 WHERE ${when}
             ON CONFLICT (name) DO UPDATE SET pending_overlaps = ${S}.jobs.pending_overlaps + 1
             RETURNING 1)`;

export function statements(S: string) {
  return {
    // Local lock + shared log: admit and insert, returning this host's other running rows
    // (whether their wrappers are gone is decided here, then `abandon`).
    admit: named(`WITH ${claimTick(S, 'true')},
                 ok AS (SELECT ${TICK_FREE} AS run),
                 ${tickSkip(S, 'NOT (SELECT run FROM ok)')},
                 ${parkSkip(S, 'NOT (SELECT run FROM ok) AND NOT EXISTS (SELECT 1 FROM tick_skip)')},
                 running AS (SELECT id, pid, wrapper_start, lock_backend, lock_key FROM ${S}.runs
                             WHERE job = :job AND host = :host AND status = 'running' AND (SELECT run FROM ok)),
                 ins AS (INSERT INTO ${S}.runs (status, ${RUN_COLUMNS}) SELECT 'running', ${RUN_VALUES}
                         WHERE (SELECT run FROM ok) RETURNING id)
            SELECT (SELECT id FROM ins) AS id,
                   (SELECT coalesce(json_agg(row_to_json(r)), '[]') FROM running r) AS running,
                   (SELECT row_to_json(t) FROM tick_skip t) AS holder,
                   (SELECT count(*) FROM parked) AS parked,
                   (SELECT max(version) FROM ${S}.schema_migrations) AS version`),
    // The postgres lock (:key), the fleet rule and the record in one round trip. Holding the
    // cluster-wide lock proves every other `running` row that held this same lock stale. A
    // lock taken for a tick already served elsewhere is given back at once. :count_skip:
    // count a skip for a held lock (a -w waiter counts only when it gives up).
    lockAndAdmit: named(`WITH l AS (SELECT pg_try_advisory_lock(:key::bigint) AS got),
                 ${claimTick(S, '(SELECT got FROM l)')},
                 ok AS (SELECT (SELECT got FROM l) AND ${TICK_FREE} AS run),
                 abandoned AS (UPDATE ${S}.runs SET status = 'abandoned', finished_at = now(), error = ${ABANDONED}
                               WHERE job = :job AND status = 'running' AND (SELECT run FROM ok)
                                 AND (lock_backend IS NULL OR (lock_backend = 'postgres' AND lock_key = :lock_key))
                               RETURNING id),
                 ins AS (INSERT INTO ${S}.runs (status, ${RUN_COLUMNS}) SELECT 'running', ${RUN_VALUES}
                         WHERE (SELECT run FROM ok) RETURNING id),
                 unlocked AS (SELECT pg_advisory_unlock(:key::bigint) WHERE (SELECT got FROM l) AND NOT (SELECT run FROM ok)),
                 ${tickSkip(S, '(SELECT got FROM l) AND NOT (SELECT run FROM ok)')},
                 holder AS (SELECT id, host, pid, started_at FROM ${S}.runs
                            WHERE job = :job AND status = 'running' AND NOT (SELECT got FROM l) ORDER BY id DESC LIMIT 1),
                 overlap AS (UPDATE ${S}.runs SET "overlaps" = "overlaps" + 1
                             WHERE id = (SELECT id FROM holder) AND :count_skip RETURNING id),
                 ${parkSkip(S, `((NOT (SELECT got FROM l) AND :count_skip AND NOT EXISTS (SELECT 1 FROM overlap))
                                 OR ((SELECT got FROM l) AND NOT (SELECT run FROM ok) AND NOT EXISTS (SELECT 1 FROM tick_skip)))`)}
            SELECT (SELECT got FROM l) AS got, (SELECT id FROM ins) AS id,
                   (SELECT count(*) FROM abandoned) + (SELECT count(*) FROM parked) + (SELECT count(*) FROM unlocked) AS touched,
                   coalesce((SELECT row_to_json(t) FROM tick_skip t), (SELECT row_to_json(h) FROM holder h)) AS holder,
                   (SELECT max(version) FROM ${S}.schema_migrations) AS version`),
    abandon: named(`UPDATE ${S}.runs SET status = 'abandoned', finished_at = now(), error = ${ABANDONED}
                    WHERE id = ANY(:ids::bigint[]) AND status = 'running'`),
    setChildPid: named(`UPDATE ${S}.runs SET child_pid = :child_pid WHERE id = :id`),
    // Skips that could not see this run's row yet were parked on the job; fold them in.
    finish: named(`WITH claimed AS (UPDATE ${S}.jobs j SET pending_overlaps = 0 FROM ${S}.jobs old
                              WHERE j.name = (SELECT job FROM ${S}.runs WHERE id = :id) AND old.name = j.name
                                AND old.pending_overlaps > 0
                              RETURNING old.pending_overlaps AS n)
             UPDATE ${S}.runs SET ${FINISH}, "overlaps" = "overlaps" + coalesce((SELECT n FROM claimed), 0)
             WHERE id = :id`),
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
    // A run written while the log was out of reach, or one that never started: one row per
    // run key, however often it is delivered, and whether or not its start got through.
    importRun: named(`INSERT INTO ${S}.runs (${RUN_COLUMNS}, child_pid, status, finished_at, duration_ms, exit_code, signal,
                        output, output_truncated, error)
                      VALUES (${RUN_VALUES}, :child_pid, :status, :finished_at, :duration_ms, :exit_code, :signal, :output,
                        :output_truncated, :error)
                      ON CONFLICT (run_key) DO UPDATE SET child_pid = coalesce(excluded.child_pid, ${S}.runs.child_pid),
                        status = excluded.status, finished_at = excluded.finished_at, duration_ms = excluded.duration_ms,
                        exit_code = excluded.exit_code, signal = excluded.signal, output = excluded.output,
                        output_truncated = excluded.output_truncated, error = excluded.error
                      RETURNING id`),
    // Advisory locks held right now by cronguard sessions; a bigint key is split into
    // classid (high 32 bits) and objid (low 32 bits).
    advisoryLocks: named(`SELECT substr(a.application_name, 11) AS job, a.pid AS backend_pid,
                           coalesce(host(a.client_addr), 'local') AS client,
                           ((l.classid::bigint << 32) | l.objid::bigint)::text AS key, a.backend_start
                    FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                      AND a.application_name LIKE 'cronguard:%'`),
    list: named(`SELECT * FROM ${S}.runs WHERE (:job::text IS NULL OR job = :job) AND (:status::text IS NULL OR status = :status)
                 ORDER BY id DESC LIMIT :limit`),
    get: named(`SELECT * FROM ${S}.runs WHERE id = :id`),
    latest: named(`SELECT * FROM ${S}.runs WHERE job = :job ORDER BY id DESC LIMIT 1`),
  };
}
