import { existsSync } from 'node:fs';
import { CronguardError, PermissionError, UnavailableError, UsageError } from '../../errors.js';
import type { Setting } from '../../util/setting.js';
import { userName } from '../../util/user.js';
import { parseConnectionString, type UriParts } from './url.js';

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
  // Tells the configs of the fleet's database apart (MySQL's is 'mysql', store/mysql/config.ts).
  readonly dialect: 'postgres';
  // The first server to try; connect() tries each of `servers` in turn.
  readonly connection: Connection;
  // libpq's host list (host=a,b / postgresql://a,b), in order, each with its port and
  // its own sslmode default.
  readonly servers: readonly Server[];
  // Which servers a session may stay on (libpq's target_session_attrs).
  readonly targetSessionAttrs: TargetSessionAttrs;
  // user@host:port/database for messages: never the password. With several hosts, all of
  // them; a session's own DbConfig (see atServer) names the one it reached.
  readonly display: string;
  readonly schema: string;
  // The server, database and schema the log lives in, as one string (the names of the state
  // dir's stamp files): the same log, the same string.
  readonly place: string;
  // Where the URL came from (a flag, a variable, a file and line), for -v.
  readonly from: string;
}

export interface Server {
  readonly connection: Connection;
  readonly display: string;
}

export const TARGET_SESSION_ATTRS = ['any', 'read-write', 'primary', 'read-only', 'standby', 'prefer-standby'] as const;
export type TargetSessionAttrs = (typeof TARGET_SESSION_ATTRS)[number];

export const DEFAULT_SCHEMA = 'cronguard';
const SCHEMA = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
// How long a run retries a server with no free connection slot (or -w, if longer).
export const BUSY_RETRY_MS = 5000;

// Only an explicit URL (--db, $CRONGUARD_DATABASE_URL or the configuration file) turns the
// PostgreSQL mode on; PG* variables alone, there for pg_dump or psql, never do. The URL is
// a libpq connection string: a URI or keyword/value pairs.
export function resolveDb(url: Setting | undefined, schemaSetting: Setting | undefined, env: Env): DbConfig | null {
  if (url === undefined) return null;
  const option = url.from.startsWith('--') ? url.from : `database URL (${url.from})`;
  const uri = parseConnectionString(url.value, option);
  const param = (name: string, variable: string) => uri.params.get(name) || env[variable] || undefined;
  // libpq's default is the operating-system user, not $USER (which cron does not set).
  const user = uri.params.get('user') || uri.user || env.PGUSER || userName();
  const database = uri.params.get('dbname') || uri.dbname || env.PGDATABASE || user;
  const givenSslmode = param('sslmode', 'PGSSLMODE') as SslMode | undefined;
  if (givenSslmode !== undefined && !SSL_MODES.includes(givenSslmode)) {
    throw new UsageError(`${option}: sslmode '${givenSslmode}' (or $PGSSLMODE) is not one of ${SSL_MODES.join(', ')}`);
  }
  const timeout = param('connect_timeout', 'PGCONNECT_TIMEOUT');
  if (timeout !== undefined && (!/^\d{1,4}$/.test(timeout) || Number(timeout) > 3600)) {
    throw new UsageError(`${option}: connect_timeout '${timeout}' (or $PGCONNECT_TIMEOUT) is not a number of seconds up to 3600`);
  }
  const attrs = (param('target_session_attrs', 'PGTARGETSESSIONATTRS') ?? 'any') as TargetSessionAttrs;
  if (!TARGET_SESSION_ATTRS.includes(attrs)) {
    throw new UsageError(`${option}: target_session_attrs '${attrs}' (or $PGTARGETSESSIONATTRS) is not one of ${TARGET_SESSION_ATTRS.join(', ')}`);
  }
  const servers = endpoints(uri, env, option).map(({ host, port }): Server => {
    const connection: Connection = Object.freeze({
      host,
      port,
      user,
      database,
      password: uri.params.get('password') ?? uri.password ?? (env.PGPASSWORD || undefined),
      sslmode: givenSslmode ?? (isLocal(host) ? 'disable' : 'prefer'),
      sslcert: param('sslcert', 'PGSSLCERT'),
      sslkey: param('sslkey', 'PGSSLKEY'),
      sslrootcert: param('sslrootcert', 'PGSSLROOTCERT'),
      // libpq treats anything below 2 seconds (but 0, "forever") as 2; per host, as libpq.
      connectTimeoutMs: timeout === undefined || timeout === '0' ? DEFAULT_CONNECT_TIMEOUT_MS : Math.max(2, Number(timeout)) * 1000,
      options: param('options', 'PGOPTIONS'),
    });
    return Object.freeze({ connection, display: `${user}@${hostPort(connection)}/${database}` });
  });
  const first = servers[0] as Server;
  const schema = resolveSchema(schemaSetting);
  return Object.freeze({
    dialect: 'postgres',
    connection: first.connection,
    servers: Object.freeze(servers),
    targetSessionAttrs: attrs,
    display: servers.length === 1 ? first.display : `${user}@${servers.map((s) => hostPort(s.connection)).join(',')}/${database}`,
    schema,
    place: `${first.connection.host}-${first.connection.port}-${first.connection.database}-${schema}`,
    from: url.from,
  });
}

// The same configuration, narrowed to the one server a session reached: what its messages,
// its spool and -v name.
export function atServer(db: DbConfig, server: Server): DbConfig {
  return Object.freeze({ ...db, connection: server.connection, servers: [server], display: server.display });
}

// host:port, an IPv6 address in brackets.
export function hostPort(conn: Connection): string {
  return `${conn.host.includes(':') ? `[${conn.host}]` : conn.host}:${conn.port}`;
}

// libpq's host and port lists: from the string, else $PGHOST and $PGPORT. One port serves
// every host; otherwise there is one per host. An empty entry is the default (the local
// socket; $PGPORT or 5432).
function endpoints(uri: UriParts, env: Env, option: string): { host: string; port: number }[] {
  const list = (text: string | undefined) => (text === undefined || text === '' ? undefined : text.split(','));
  const hosts = list(uri.params.get('host')) ?? uri.hosts ?? list(env.PGHOST) ?? [''];
  const fromString = list(uri.params.get('port')) ?? uri.ports;
  const ports = fromString ?? list(env.PGPORT) ?? [''];
  const which = fromString ? `the port in ${option}` : `$PGPORT '${env.PGPORT}'`;
  if (ports.length !== 1 && ports.length !== hosts.length) {
    throw new UsageError(`${fromString ? option : '$PGPORT'}: ${ports.length} ports for ${hosts.length} hosts (give one port for all of them, or one per host)`);
  }
  return hosts.map((host, i) => {
    const text = (ports.length === 1 ? ports[0] : ports[i]) || (fromString && env.PGPORT) || '5432';
    if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65535) {
      // A port in the URL is not echoed: a raw '/' in a password can make a piece of it
      // look like one.
      throw new UsageError(`${which} is not a number from 1 to 65535`);
    }
    const port = Number(text);
    return { host: host || defaultHost(port), port };
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

// SQLSTATE class 22 (data exception) or 23 (integrity constraint): what the server refuses
// for a statement's values, and will refuse every time.
export function isDataError(error: unknown): boolean {
  return isServerError(error) && /^2[23]/.test((error as { code: string }).code);
}

// SQLSTATE 42501 (insufficient_privilege) and the class of refused logins (28).
export function isPrivilegeError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return code === '42501' || (typeof code === 'string' && code.startsWith('28'));
}

// A run's admission that the server refused as read-only (SQLSTATE 25006): a standby that it,
// or a pooler in front of it still reporting the primary it knew, said was a primary at login.
// One line, 69; nothing ran.
export function readOnlyRun(error: unknown, where: string): CronguardError | null {
  if ((error as { code?: unknown })?.code !== '25006') return null;
  return new UnavailableError(
    `PostgreSQL at ${where} is read-only (${(error as Error).message}): a standby, though it or a pooler in front of it reported a primary; nothing ran. Point the URL at the primary`,
  );
}

// A failure PostgreSQL answered (a SQLSTATE), as a subcommand reports it; null for any other.
export function answeredError(error: unknown): CronguardError | null {
  const code = (error as { code?: unknown })?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return null;
  const message = (error as Error).message;
  if (code === '25006') {
    return new UnavailableError(`PostgreSQL is read-only (a standby?): ${message}; point the URL at the primary, or add target_session_attrs=read-write`);
  }
  return isPrivilegeError(error) ? new PermissionError(`PostgreSQL: ${message}`) : new UnavailableError(`PostgreSQL: ${message} (SQLSTATE ${code})`);
}

// A run takes its lock and writes its record on the primary: target_session_attrs that
// asks for a standby can never serve it (reading subcommands may use such a URL).
export function refuseStandbyOnly(db: DbConfig): void {
  const attrs = db.targetSessionAttrs;
  if (attrs === 'read-only' || attrs === 'standby' || attrs === 'prefer-standby') {
    throw new UsageError(
      `${db.from.startsWith('--') ? db.from : `database URL (${db.from})`}: target_session_attrs=${attrs} asks for a standby, but a run locks and records on the primary; use read-write or primary (or leave it out)`,
    );
  }
}

// Maps a failure to reach or use PostgreSQL onto the contract's exit codes: refused logins
// and missing privileges are 77, everything that makes the server unreachable 69.
export function pgError(error: unknown, where: string): CronguardError {
  // Already said in the contract's terms (a failed connect names its server itself).
  if (error instanceof CronguardError) return error;
  const e = error as { code?: string; message?: string };
  const code = e?.code ?? '';
  const message = e?.message ?? String(error);
  if (code === '42501') return new PermissionError(`PostgreSQL at ${where}: ${message}`);
  // read_only_sql_transaction: a subcommand that writes, sent to a standby.
  if (code === '25006') return new UnavailableError(`PostgreSQL at ${where} is read-only (a standby?): ${message}; point the URL at the primary, or add target_session_attrs=read-write`);
  if (isPrivilegeError(error)) return new PermissionError(`PostgreSQL at ${where} refused the login: ${message}`);
  if (NETWORK.has(code)) return new UnavailableError(`cannot reach PostgreSQL at ${where}: ${code}`);
  // pg's own words when connect_timeout (10 s unless the URL says) ran out.
  if (message === 'timeout expired') return new UnavailableError(`cannot reach PostgreSQL at ${where}: no answer within its connect_timeout`);
  return new UnavailableError(`PostgreSQL at ${where}: ${message}`);
}
