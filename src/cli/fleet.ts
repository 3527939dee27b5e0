import { isRedisUrl, redisKeys, resolveRedisTarget } from '../lock/redis/target.js';
import { resolveDatabase } from '../store/database-config.js';
import { dialectOf, dialectWithLock } from '../store/dialects.js';
import { mysqlLockName } from '../store/mysql/lock-name.js';
import { advisoryKey, parseLockKey } from '../store/postgres/lock.js';

// What resolving an invocation needs of the servers a fleet shares: the database's URL and
// dialect, the locks it holds and their keys, and a Redis lock's URL and keys. The caller
// loads this module only when a URL is configured (config.ts usesFleet), so that a run
// without one loads no dialect's code.
export const FLEET = { resolveDatabase, dialectOf, dialectWithLock, mysqlLockName, advisoryKey, parseLockKey, isRedisUrl, resolveRedisTarget, redisKeys };
export type Fleet = typeof FLEET;
