import { CronguardError, PermissionError, UnavailableError } from '../../errors.js';

// MySQL's and MariaDB's error numbers that cronguard answers differently (the two servers
// share them); see the server error reference of either.
export const ER = {
  // Access denied: the login (1045, 1698: no password given), a database (1044), a
  // table (1142), a column (1143), a privilege such as PROCESS or SUPER (1227), a routine (1370).
  accessDenied: [1045, 1044, 1142, 1143, 1227, 1370, 1698],
  // Too many connections, for the server (1040), this user (1203) or the account's
  // MAX_USER_CONNECTIONS (1226, shared hosting's usual limit): a fleet connecting at the top
  // of the minute; retried while a run may wait, as PostgreSQL's 53300.
  busy: [1040, 1203, 1226],
  // The server runs read_only or super_read_only (a replica: 1290; MariaDB's read-only mode:
  // 1836) or the transaction is read-only (1792).
  readOnly: [1290, 1792, 1836],
  // The transaction was rolled back and may simply be tried again.
  deadlock: 1213,
  lockWaitTimeout: 1205,
  // Connecting to a database (the URL's) that does not exist.
  badDatabase: 1049,
  // Sent just before the server drops the connection: shutting down (1053), the
  // connection killed (MariaDB's 1927; MySQL just closes it). They end the session.
  connectionEnded: [1053, 1927],
  // MySQL 8 refuses a connection without TLS under require_secure_transport (MariaDB
  // answers 1045, access denied, instead).
  secureTransportRequired: 3159,
} as const;

// The driver's codes for a connection that failed or ended, beside the system's.
const NETWORK = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
  'EPIPE',
  'ENOENT',
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
]);

interface DriverError {
  readonly code?: string;
  readonly errno?: number;
  readonly sqlState?: string;
  readonly sqlMessage?: string;
  readonly message?: string;
}

// The server's error number, when the server sent the error.
export function serverErrno(error: unknown): number | null {
  const e = error as DriverError | null;
  return typeof e?.errno === 'number' && e.errno > 0 && typeof e.sqlState === 'string' ? e.errno : null;
}

// As PostgreSQL's (postgres/config.ts isDataError), by the SQLSTATE MySQL sends beside its
// error number: class 22 (data exception) or 23 (integrity constraint).
export function isDataError(error: unknown): boolean {
  return serverErrno(error) !== null && /^2[23]/.test((error as DriverError).sqlState as string);
}

// An error the server reported about a statement (it carries an error number and SQLSTATE),
// as opposed to a lost or refused connection, or one the server is about to drop.
export function isServerError(error: unknown): boolean {
  const errno = serverErrno(error);
  return errno !== null && !(ER.connectionEnded as readonly number[]).includes(errno);
}

export function isPrivilegeError(error: unknown): boolean {
  return (ER.accessDenied as readonly number[]).includes(serverErrno(error) ?? 0);
}

// A failure MySQL or MariaDB answered (an error number and a SQLSTATE), as a subcommand
// reports it; null for any other.
export function answeredError(error: unknown): CronguardError | null {
  const errno = serverErrno(error);
  if (errno === null || typeof (error as { code?: unknown })?.code !== 'string') return null;
  const said = (error as { sqlMessage?: string }).sqlMessage ?? (error as Error).message;
  return isPrivilegeError(error) ? new PermissionError(`MySQL: ${said}; see Grants in man cronguard`) : new UnavailableError(`MySQL: ${said} (error ${errno})`);
}

export function isBusyError(error: unknown): boolean {
  return (ER.busy as readonly number[]).includes(serverErrno(error) ?? 0);
}

// A deadlock or lock wait timeout: the transaction is gone and can be run again.
export function isRetryableTransaction(error: unknown): boolean {
  const errno = serverErrno(error);
  return errno === ER.deadlock || errno === ER.lockWaitTimeout;
}

// Maps a failure to reach or use MySQL onto the contract's exit codes: refused logins and
// missing privileges are 77, everything that makes the server unreachable or unusable 69.
// `where` is the server's display (user@host:port/database), never the password.
export function mysqlError(error: unknown, where: string): CronguardError {
  if (error instanceof CronguardError) return error;
  const e = error as DriverError | null;
  const code = e?.code ?? '';
  const message = e?.sqlMessage ?? e?.message ?? String(error);
  const errno = serverErrno(error);
  if (errno !== null) {
    if (errno === 1045 || errno === 1698) return new PermissionError(`MySQL at ${where} refused the login: ${message}`);
    if (errno === ER.secureTransportRequired) {
      return new UnavailableError(`MySQL at ${where} accepts only TLS connections: set ssl-mode=required (or verify_identity with ssl-ca) in the URL`);
    }
    if (isPrivilegeError(error)) return new PermissionError(`MySQL at ${where}: ${message}; see Grants in man cronguard`);
    if ((ER.readOnly as readonly number[]).includes(errno)) {
      return new UnavailableError(`MySQL at ${where} is read-only (a replica?): ${message}; point the URL at the primary`);
    }
    if (errno === ER.badDatabase) return new UnavailableError(`MySQL at ${where}: ${message}; the URL's database must exist (or leave it out)`);
    return new UnavailableError(`MySQL at ${where}: ${message} (error ${errno})`);
  }
  if (NETWORK.has(code)) return new UnavailableError(`cannot reach MySQL at ${where}: ${code}`);
  // The server's certificate failed ssl-mode's check (verify_ca, verify_identity).
  if (code === 'HANDSHAKE_SSL_ERROR') return new UnavailableError(`MySQL at ${where}: its TLS certificate was refused (${message}); check the URL's ssl-ca and host`);
  if (code === 'HANDSHAKE_NO_SSL_SUPPORT') {
    return new UnavailableError(`MySQL at ${where} does not offer TLS, which the URL's ssl-mode asks for: enable TLS on the server, or use ssl-mode=preferred`);
  }
  return new UnavailableError(`MySQL at ${where}: ${message}`);
}

// A run's admission that the server refused as read-only (see ER.readOnly): a replica, where a
// lock taken alone would fence nothing. One line, 69; nothing ran.
export function readOnlyRun(error: unknown, where: string): CronguardError | null {
  if (!(ER.readOnly as readonly number[]).includes(serverErrno(error) ?? 0)) return null;
  const e = error as DriverError;
  return new UnavailableError(`MySQL at ${where} is read-only (${e.sqlMessage ?? e.message}): a replica; nothing ran. Point the URL at the primary`);
}

// The lock taken alone (no run log) on a server that runs read_only: a replica. One line, 69.
export function readOnlyServer(where: string): CronguardError {
  return new UnavailableError(`MySQL at ${where} is read-only (read_only is ON): a replica; nothing ran. Point the URL at the primary`);
}

// Why the connection failed under a statement, in the words of its other ends: the driver
// rejects a statement on a socket that just closed with "Can't add new command when connection
// is in closed state", which says nothing to an operator.
export function lostReason(error: Error & { code?: unknown }, what: string): string {
  if (typeof error.code === 'string' && /^E[A-Z]+$/.test(error.code)) return `connection lost: ${error.code}`;
  if (/closed state/.test(error.message)) return 'the connection was closed';
  return `${what}: ${error.message}`;
}
