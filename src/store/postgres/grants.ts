import { PermissionError, UsageError } from '../../errors.js';
import type { PgSession } from './session.js';
import { grantRequests } from './sql-schema.js';

// Lets `role` write requests into the shared log (`cronguard migrate --group ROLE`), in one
// transaction: all of it or nothing. Run by the schema's owner (or a superuser).
export async function allowRequests(session: PgSession, schema: string, role: string): Promise<void> {
  // PostgreSQL reads the name public, quoted or not, as PUBLIC: every role that can connect
  // would queue arguments for the jobs' commands.
  if (role === 'public') throw new UsageError('--group: public is every role that can connect; create a role for the web application and name it');
  const statements = grantRequests(session.escapeIdentifier(schema), session.escapeIdentifier(role));
  await session.query('BEGIN');
  try {
    for (const statement of statements) await session.query(statement);
    await session.query('COMMIT');
  } catch (error) {
    await session.query('ROLLBACK').catch(() => {});
    const code = (error as { code?: string }).code;
    if (code === '42704') throw new UsageError(`--group: no role '${role}' in the database`);
    if (code === '42501') throw new PermissionError(`--group: only the owner of schema ${schema} can grant its privileges (${(error as Error).message})`);
    throw error;
  }
}
