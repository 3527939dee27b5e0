import { resolveDatabase } from '../store/database-config.js';
import { dialectOf, dialectWithLock } from '../store/dialects.js';
import { mysqlLockName } from '../store/mysql/lock-name.js';
import { advisoryKey, parseLockKey } from '../store/postgres/lock.js';

// What resolving an invocation needs of the fleet's database: its URL's dialect, the locks
// it holds and their keys. The caller loads this module only when a URL is configured
// (config.ts databaseSetting), so that a run without one loads no dialect's code.
export const FLEET = { resolveDatabase, dialectOf, dialectWithLock, mysqlLockName, advisoryKey, parseLockKey };
export type Fleet = typeof FLEET;
