import { sha256 } from '../../util/sha256.js';

// The server ends a lock session silent this long (its wait_timeout), which frees the name:
// a network partition strands a job's lock for a minute, not for the server's default eight
// hours (see lock.ts for why a stopped wrapper's command is dead by then).
export const LOCK_IDLE_S = 60;

// The GET_LOCK name of a job whose tables are in database `schema`: 'cg:' and the first 40
// hex digits of SHA-256('cronguard:' || schema || ':' || job), 43 characters (MySQL allows
// 64). Lower-case hex, so the same on MariaDB (whose names are case-sensitive) and MySQL
// (whose are not). Staging and production (two databases) never share a lock. In SQL, for an
// application that wants to hold off a job (docs/fleet-mysql.md):
//   SELECT GET_LOCK(CONCAT('cg:', LEFT(SHA2(CONCAT('cronguard:', 'cronguard', ':', 'JOB'), 256), 40)), 0);
export function mysqlLockName(schema: string, job: string): string {
  return `cg:${sha256(`cronguard:${schema}:${job}`).toString('hex').slice(0, 40)}`;
}
