import { type CronguardError, PermissionError, UnavailableError } from '../../errors.js';

// SQLite's result codes, as better-sqlite3 names them.

// Another writer holds the file (see busy.ts).
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'));
}

// A failure of the embedded log, as a subcommand reports it: a read-only or unopenable file
// is 77, anything else 69; null for an error that is not SQLite's.
export function answeredError(error: unknown): CronguardError | null {
  const code = (error as { code?: unknown })?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return null;
  const message = (error as Error).message;
  const denied = /^SQLITE_(READONLY|PERM|AUTH|CANTOPEN)/.test(code);
  return denied ? new PermissionError(`run log: ${message}`) : new UnavailableError(`run log: ${message} (${code})`);
}
