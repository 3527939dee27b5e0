import type { ServerLock } from '../shared.js';
import { isServerError } from './errors.js';
import { mysqlLockName } from './lock-name.js';
import type { MysqlSession } from './session.js';
import { quoteName } from './sql.js';

// The GET_LOCK names of this log's jobs held right now, for `cronguard locks`. A name is a
// hash: the server cannot say whose it is. Where performance_schema is on (MySQL 8's
// default; MariaDB's is off) and this account may read it, it lists every granted name with
// its holder's connection, host and program name ('cronguard:JOB', as PostgreSQL's
// application_name). The log says which names to ask about in any case: each running row's
// under the mysql lock and each job's own, checked with IS_USED_LOCK (any account may);
// without performance_schema, a --no-log run of a job the log has never seen is the one
// lock not shown.

// (database) The names the log knows and whose they are; IS_USED_LOCK is the holder's
// CONNECTION_ID(), NULL while free. UNION drops a running row's name that is its job's own.
const FROM_RUN_LOG = (D: string) =>
  `SELECT c.job, c.name, IS_USED_LOCK(c.name) AS holder
   FROM (SELECT job, lock_key AS name FROM ${D}.runs WHERE status = 'running' AND lock_backend = 'mysql' AND lock_key IS NOT NULL
         UNION SELECT name AS job, CONCAT('cg:', LEFT(SHA2(CONCAT('cronguard:', ?, ':', name), 256), 40)) FROM ${D}.jobs) c
   HAVING holder IS NOT NULL`;

// cronguard's granted user-level locks (see MySQL's "The metadata_locks Table": a GET_LOCK
// name is the OBJECT_NAME of an OBJECT_TYPE 'USER LEVEL LOCK'), with the holder's
// connection id, host and program_name connection attribute.
const FROM_PERFORMANCE_SCHEMA = `SELECT m.OBJECT_NAME AS name, t.PROCESSLIST_ID AS holder, t.PROCESSLIST_HOST AS client,
    (SELECT a.ATTR_VALUE FROM performance_schema.session_connect_attrs a
     WHERE a.PROCESSLIST_ID = t.PROCESSLIST_ID AND a.ATTR_NAME = 'program_name') AS program
  FROM performance_schema.metadata_locks m JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID
  WHERE m.OBJECT_TYPE = 'USER LEVEL LOCK' AND m.LOCK_STATUS = 'GRANTED' AND m.OBJECT_NAME LIKE 'cg:%'`;

interface Held {
  readonly job: string | null;
  readonly name: string;
  readonly holder: number | string;
  readonly client?: string | null;
  readonly program?: string | null;
}

export async function heldMysqlLocks(session: MysqlSession, database: string): Promise<ServerLock[]> {
  const logged = await session.query<Held>(FROM_RUN_LOG(quoteName(database)), [database]);
  const shown = await fromPerformanceSchema(session);
  const jobOf = new Map(logged.map((r) => [r.name, r.job]));
  // Both: performance_schema's rows say more, the log's stay right if its instrument is off.
  const byName = new Map([...logged, ...(shown ?? [])].map((r) => [r.name, r]));
  const locks: ServerLock[] = [];
  for (const r of byName.values()) {
    // A name the log does not know is this log's when it is its holder program's job's own.
    const job = jobOf.get(r.name) ?? (r.program?.startsWith('cronguard:') ? r.program.slice('cronguard:'.length) : null);
    const jobsOwn = job !== null && r.name === mysqlLockName(database, job);
    if (job === null || (!jobOf.has(r.name) && !jobsOwn)) continue;
    locks.push({ lock: 'mysql', key: r.name, job, jobsOwn, holder: Number(r.holder), client: r.client ?? null, since: null });
  }
  return locks;
}

// The names performance_schema shows held; null where it is off, or this account may not
// read it (SELECT on performance_schema is a grant of its own): the log's names then.
async function fromPerformanceSchema(session: MysqlSession): Promise<Held[] | null> {
  const [on] = await session.query<{ ps: number | string }>('SELECT @@performance_schema AS ps');
  if (Number(on?.ps) !== 1) return null;
  try {
    return await session.query<Held>(FROM_PERFORMANCE_SCHEMA);
  } catch (error) {
    if (isServerError(error)) return null;
    throw error;
  }
}
