import { UsageError } from '../../errors.js';
import { serverErrno } from './errors.js';
import type { MysqlSession } from './session.js';
import { quoteName } from './sql.js';

// No such account: MariaDB's "can't find any matching row in the user table" (1133), MySQL
// 8's "you are not allowed to create a user with GRANT" (1410).
const NO_ACCOUNT = new Set([1133, 1410]);

// `migrate --group ACCOUNT` on MySQL: what a web application's account needs to queue
// requests (the documented INSERT), cancel one, and follow them and their runs. ACCOUNT is
// a user or role ('webapp': MariaDB's roles have no host, and MySQL reads it as
// 'webapp'@'%', as it names roles too) or 'user@host', as CREATE USER named it.
export async function allowRequests(session: MysqlSession, database: string, account: string): Promise<void> {
  const D = quoteName(database);
  const who = accountName(account);
  try {
    await session.query(`GRANT SELECT ON ${D}.* TO ${who}`);
    await session.query(`GRANT INSERT, UPDATE (status, finished_at) ON ${D}.requests TO ${who}`);
  } catch (error) {
    if (!NO_ACCOUNT.has(serverErrno(error) ?? 0)) throw error;
    throw new UsageError(`--group: no user or role '${account}' on the server; CREATE USER (or CREATE ROLE) it first`);
  }
}

function accountName(account: string): string {
  const at = account.lastIndexOf('@');
  const literal = (s: string) => `'${s.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
  if (at < 0) {
    if (account === '') throw new UsageError('--group: give a MySQL user or role, or user@host');
    return literal(account);
  }
  const [user, host] = [account.slice(0, at), account.slice(at + 1)];
  if (user === '' || host === '') throw new UsageError(`--group: give a MySQL user or role, or user@host, not '${account}'`);
  return `${literal(user)}@${literal(host)}`;
}
