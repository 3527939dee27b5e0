import { UsageError } from '../../errors.js';
import type { MysqlSession } from './session.js';
import { quoteName } from './sql.js';

// `migrate --group ACCOUNT` on MySQL: what a web application's account needs to queue
// requests (the documented INSERT), cancel one, and follow them and their runs. ACCOUNT is
// 'user' or 'user@host' (host '%' when left out), as CREATE USER named it.
export async function allowRequests(session: MysqlSession, database: string, account: string): Promise<void> {
  const D = quoteName(database);
  const who = accountName(account);
  await session.query(`GRANT SELECT ON ${D}.* TO ${who}`);
  await session.query(`GRANT INSERT, UPDATE (status, finished_at) ON ${D}.requests TO ${who}`);
}

function accountName(account: string): string {
  const at = account.lastIndexOf('@');
  const [user, host] = at > 0 ? [account.slice(0, at), account.slice(at + 1)] : [account, '%'];
  if (user === '' || host === '') throw new UsageError(`--group: give a MySQL account as user or user@host, not '${account}'`);
  const literal = (s: string) => `'${s.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
  return `${literal(user)}@${literal(host)}`;
}
