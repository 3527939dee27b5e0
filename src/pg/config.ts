import { existsSync } from 'node:fs';
import type { Setting } from '../cli/settings.js';
import { type CronguardError, PermissionError, UnavailableError, UsageError } from '../errors.js';
import { userName } from '../util/user.js';
import { parseUri } from './url.js';

type Env = Readonly<Record<string, string | undefined>>;

export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

// Where and how to connect, resolved as libpq would: the URL first, then the PG* variables,
// then libpq's defaults (the local socket, the operating-system user, a database named after
// the user). The driver gets these fields, never the URL.
export interface Connection {
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly database: string;
  // undefined: look in ~/.pgpass (or $PGPASSFILE), as libpq does.
  readonly password: string | undefined;
  readonly sslmode: SslMode;
  readonly sslcert: string | undefined;
  readonly sslkey: string | undefined;
  readonly sslrootcert: string | undefined;
  readonly connectTimeoutMs: number;
  readonly options: string | undefined;
}

export interface DbConfig {
  readonly connection: Connection;
  // user@host:port/database for messages: never the password.
  readonly display: string;
  readonly schema: string;
  // Where the URL came from (a flag, a variable, a file and line), for -v.
  readonly from: string;
}

export const DEFAULT_SCHEMA = 'cronguard';
const SCHEMA = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
// How long a run retries a server with no free connection slot (or -w, if longer).
export const BUSY_RETRY_MS = 5000;

// Only an explicit URL (--db, $CRONGUARD_DATABASE_URL or the configuration file) turns the
// PostgreSQL mode on; PG* variables alone, there for pg_dump or psql, never do.
export function resolveDb(url: Setting | undefined, schemaSetting: Setting | undefined, env: Env): DbConfig | null {
  if (url === undefined) return null;
  const option = url.from.startsWith('--') ? url.from : `database URL (${url.from})`;
  const uri = parseUri(url.value, option);
  const param = (name: string, variable: string) => uri.params.get(name) || env[variable] || undefined;
  // libpq's default is the operating-system user, not $USER (which cron does not set).
  const user = uri.params.get('user') || uri.user || env.PGUSER || userName();
  const fromUrl = uri.params.get('port') || uri.port;
  const portText = fromUrl || env.PGPORT || '5432';
  if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) {
    // A port in the URL is not echoed: a raw '/' in a password can make a piece of it look
    // like one.
    const which = fromUrl ? `the port in ${option}` : `$PGPORT '${portText}'`;
    throw new UsageError(`${which} is not a number from 1 to 65535`);
  }
  const port = Number(portText);
  const host = uri.params.get('host') || uri.host || env.PGHOST || defaultHost(port);
  const sslmode = (param('sslmode', 'PGSSLMODE') ?? (isLocal(host) ? 'disable' : 'prefer')) as SslMode;
  if (!SSL_MODES.includes(sslmode)) {
    throw new UsageError(`${option}: sslmode '${sslmode}' (or $PGSSLMODE) is not one of ${SSL_MODES.join(', ')}`);
  }
  const timeout = param('connect_timeout', 'PGCONNECT_TIMEOUT');
  if (timeout !== undefined && (!/^\d{1,4}$/.test(timeout) || Number(timeout) > 3600)) {
    throw new UsageError(`${option}: connect_timeout '${timeout}' (or $PGCONNECT_TIMEOUT) is not a number of seconds up to 3600`);
  }
  const connection: Connection = {
    host,
    port,
    user,
    database: uri.params.get('dbname') || uri.dbname || env.PGDATABASE || user,
    password: uri.params.get('password') ?? uri.password ?? (env.PGPASSWORD || undefined),
    sslmode,
    sslcert: param('sslcert', 'PGSSLCERT'),
    sslkey: param('sslkey', 'PGSSLKEY'),
    sslrootcert: param('sslrootcert', 'PGSSLROOTCERT'),
    // libpq treats anything below 2 seconds (but 0, "forever") as 2.
    connectTimeoutMs: timeout === undefined || timeout === '0' ? DEFAULT_CONNECT_TIMEOUT_MS : Math.max(2, Number(timeout)) * 1000,
    options: param('options', 'PGOPTIONS'),
  };
  return Object.freeze({
    connection: Object.freeze(connection),
    display: `${user}@${host}:${port}/${connection.database}`,
    schema: resolveSchema(schemaSetting),
    from: url.from,
  });
}

export function resolveSchema(setting: Setting | undefined): string {
  const schema = setting?.value ?? DEFAULT_SCHEMA;
  const option = setting === undefined || setting.from.startsWith('--') ? '--schema' : `schema (${setting.from})`;
  if (!SCHEMA.test(schema)) {
    throw new UsageError(`${option}: '${schema}' is not a plain identifier (letters, digits, _; at most 63)`);
  }
  if (/^pg_/i.test(schema) || schema.toLowerCase() === 'information_schema') {
    throw new UsageError(`${option}: '${schema}' is a PostgreSQL system schema; choose another name`);
  }
  return schema;
}

// libpq's default host is the local socket; Debian puts it in /var/run/postgresql.
function defaultHost(port: number): string {
  for (const dir of ['/var/run/postgresql', '/tmp']) {
    if (existsSync(`${dir}/.s.PGSQL.${port}`)) return dir;
  }
  return 'localhost';
}

// TLS protects nothing on a socket or loopback: libpq never uses it on a socket, and the
// default 'prefer' costs a second connection to a server without TLS.
function isLocal(host: string): boolean {
  return host.startsWith('/') || host === 'localhost' || host === '::1' || /^127\./.test(host);
}

const NETWORK = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'EPIPE', 'ENOENT']);

// An error the server reported (it carries a SQLSTATE), as opposed to a lost connection.
export function isServerError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}

// SQLSTATE 42501 (insufficient_privilege) and the class of refused logins (28).
export function isPrivilegeError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return code === '42501' || (typeof code === 'string' && code.startsWith('28'));
}

// Maps a failure to reach or use PostgreSQL onto the contract's exit codes: refused logins
// and missing privileges are 77, everything that makes the server unreachable 69.
export function pgError(error: unknown, where: string): CronguardError {
  const e = error as { code?: string; message?: string };
  const code = e?.code ?? '';
  const message = e?.message ?? String(error);
  if (code === '42501') return new PermissionError(`PostgreSQL at ${where}: ${message}`);
  if (isPrivilegeError(error)) return new PermissionError(`PostgreSQL at ${where} refused the login: ${message}`);
  if (NETWORK.has(code)) return new UnavailableError(`cannot reach PostgreSQL at ${where}: ${code}`);
  return new UnavailableError(`PostgreSQL at ${where}: ${message}`);
}
