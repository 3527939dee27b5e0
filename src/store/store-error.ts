import type { CronguardError } from '../errors.js';
import { answeredError as mysql, serverErrno } from './mysql/errors.js';
import { isServerError, answeredError as postgres } from './postgres/config.js';
import { answeredError as sqlite } from './sqlite/errors.js';

// A failure of the run log's database, as a subcommand reports it: a missing privilege or a
// read-only file is 77, anything else that keeps the log from answering 69. Null for errors
// that are not the database's (those are bugs, and keep their stack). Each dialect tells its
// own errors apart.
export function storeError(error: unknown): CronguardError | null {
  return postgres(error) ?? mysql(error) ?? sqlite(error);
}

// An error the server sent in answer to a statement, not a lost connection: PostgreSQL's
// carries a SQLSTATE as its code, MySQL's (mysql2) an error number and a SQLSTATE.
export function answeredByServer(error: unknown): boolean {
  return isServerError(error) || serverErrno(error) !== null;
}
