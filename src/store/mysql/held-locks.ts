import type { ServerLock } from '../shared.js';
import { isPrivilegeError, isServerError } from './errors.js';
import { mysqlLockName } from './lock-name.js';
import type { MysqlSession } from './session.js';
import { quoteName } from './sql.js';

// The GET_LOCK names of this log's jobs held right now, for `cronguard locks`. A name is a
// hash: the server cannot say whose it is, the log can. So the names asked about are those
// the log knows: each running row's under the mysql lock, and each job's own name in this
// database (a --no-log run, or an application holding a job off, has no running row).
// IS_USED_LOCK answers for any account, with or without performance_schema; where
// performance_schema is on (MySQL 8's default; off in MariaDB's) and readable, its
// metadata_locks and threads tables add where the holder connects from.

// (database) The names, and whose they are: UNION drops a running row's name that is its
// job's own too. IS_USED_LOCK is the holder's CONNECTION_ID(), NULL while free.
const held = (D: string) =>
  `SELECT c.job, c.name, IS_USED_LOCK(c.name) AS holder, @@performance_schema AS ps
   FROM (SELECT job, lock_key AS name FROM ${D}.runs WHERE status = 'running' AND lock_backend = 'mysql' AND lock_key IS NOT NULL
         UNION SELECT name AS job, CONCAT('cg:', LEFT(SHA2(CONCAT('cronguard:', ?, ':', name), 256), 40)) FROM ${D}.jobs) c
   HAVING holder IS NOT NULL`;

// The user-level locks performance_schema shows granted, with the holder's connection id
// and host (see MySQL's "The metadata_locks Table": a GET_LOCK name is an OBJECT_NAME of
// OBJECT_TYPE 'USER LEVEL LOCK'). Only cronguard's names ('cg:' and 40 hex digits).
const FROM_PERFORMANCE_SCHEMA = `SELECT m.OBJECT_NAME AS name, t.PROCESSLIST_ID AS holder, t.PROCESSLIST_HOST AS client
  FROM performance_schema.metadata_locks m JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID
  WHERE m.OBJECT_TYPE = 'USER LEVEL LOCK' AND m.LOCK_STATUS = 'GRANTED' AND m.OBJECT_NAME LIKE 'cg:%'`;

interface HeldRow {
  readonly job: string;
  readonly name: string;
  readonly holder: number;
  readonly ps: number | string | null;
}

export async function heldMysqlLocks(session: MysqlSession, database: string): Promise<ServerLock[]> {
  const rows = await session.query<HeldRow>(held(quoteName(database)), [database]);
  const clients = Number(rows[0]?.ps) === 1 ? await connectedFrom(session) : new Map<string, string | null>();
  return rows.map((r) => ({
    lock: 'mysql', key: r.name, job: r.job, jobsOwn: r.name === mysqlLockName(database, r.job),
    holder: Number(r.holder), client: clients.get(r.name) ?? null, since: null,
  }));
}

// Each held name's client host, from performance_schema; none when this account may not
// read it (SELECT on performance_schema is a grant of its own): the locks are known anyway.
async function connectedFrom(session: MysqlSession): Promise<Map<string, string | null>> {
  try {
    const rows = await session.query<{ name: string; holder: number; client: string | null }>(FROM_PERFORMANCE_SCHEMA);
    return new Map(rows.map((r) => [r.name, r.client]));
  } catch (error) {
    if (isPrivilegeError(error) || isServerError(error)) return new Map();
    throw error;
  }
}
