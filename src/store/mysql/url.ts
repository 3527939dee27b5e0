import { UsageError } from '../../errors.js';
import type { Setting } from '../../util/setting.js';
import { userName } from '../../util/user.js';
import { MYSQL_SSL_MODES, type MysqlConfig, type MysqlSslMode } from './config.js';

type Env = Readonly<Record<string, string | undefined>>;

// A URL of this form names a MySQL or MariaDB server (the two speak the same protocol).
export function isMysqlUrl(url: string): boolean {
  return /^(mysql|mariadb):\/\//i.test(url);
}

export const DEFAULT_MYSQL_SCHEMA = 'cronguard';
const DEFAULT_PORT = 3306;
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
// A database name cronguard creates and names unquoted: letters, digits, _ (MySQL allows
// 64 characters).
const SCHEMA = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const SYSTEM = new Set(['mysql', 'information_schema', 'performance_schema', 'sys']);
// The query parameters understood, as MySQL's own clients spell them (--ssl-mode, ...).
const PARAMS = new Set(['ssl-mode', 'ssl', 'ssl-ca', 'ssl-cert', 'ssl-key', 'connect-timeout', 'socket']);

// mysql://USER[:PASSWORD]@HOST[:PORT][/DATABASE][?ssl-mode=...&ssl-ca=...&connect-timeout=S&socket=PATH]
// (or mariadb://). Percent-escapes are decoded; the password may also come from $MYSQL_PWD,
// as MySQL's client reads it. The URL's database is only the one connected to (none by
// default): the tables live in `schema` (--schema, cronguard by default).
export function resolveMysql(url: Setting, schemaSetting: Setting | undefined, env: Env): MysqlConfig {
  const option = url.from.startsWith('--') ? url.from : `database URL (${url.from})`;
  let parsed: URL;
  try {
    parsed = new URL(url.value);
  } catch {
    // Not echoed: it may hold a password. Nor is the form written with `//USER[:PASSWORD]@`,
    // which every line's redaction (util/redact.ts) would take for credentials and mask.
    throw new UsageError(`${option}: not a URL of the form mysql://USER@HOST[:PORT][/DATABASE], with USER:PASSWORD for a password (percent-encode @, / and : in it)`);
  }
  const decode = (text: string, what: string) => {
    try {
      return decodeURIComponent(text);
    } catch {
      throw new UsageError(`${option}: the ${what} has a broken %-escape (% and two hex digits)`);
    }
  };
  const params = queryParams(parsed, option);
  const host = decode(parsed.hostname.replace(/^\[(.*)\]$/, '$1'), 'host') || 'localhost';
  const port = parsed.port === '' ? DEFAULT_PORT : Number(parsed.port);
  if (!(port >= 1 && port <= 65535)) throw new UsageError(`${option}: the port is not a number from 1 to 65535`);
  const path = decode(parsed.pathname.replace(/^\//, ''), 'database');
  if (path.includes('/')) throw new UsageError(`${option}: the path names one database, '${path}' is not one`);
  const user = decode(parsed.username, 'user') || userName();
  const timeout = params.get('connect-timeout');
  if (timeout !== undefined && (!/^\d{1,4}$/.test(timeout) || Number(timeout) < 1 || Number(timeout) > 3600)) {
    throw new UsageError(`${option}: connect-timeout '${timeout}' is not a number of seconds from 1 to 3600`);
  }
  const socket = params.get('socket');
  if (socket !== undefined && !socket.startsWith('/')) throw new UsageError(`${option}: socket '${socket}' is not an absolute path`);
  const display = `${user}@${socket ?? `${host.includes(':') ? `[${host}]` : host}:${port}`}${path ? `/${path}` : ''}`;
  const schema = resolveMysqlSchema(schemaSetting);
  return Object.freeze({
    dialect: 'mysql',
    host,
    port,
    socket,
    user,
    password: parsed.password !== '' ? decode(parsed.password, 'password') : env.MYSQL_PWD || undefined,
    database: path || undefined,
    schema,
    sslMode: sslMode(params, option, socket !== undefined || isLocal(host)),
    sslCa: params.get('ssl-ca'),
    sslCert: params.get('ssl-cert'),
    sslKey: params.get('ssl-key'),
    connectTimeoutMs: timeout === undefined ? DEFAULT_CONNECT_TIMEOUT_MS : Number(timeout) * 1000,
    display,
    place: `mysql-${socket ?? `${host}-${port}`}-${schema}`,
    from: url.from,
  } satisfies MysqlConfig);
}

// The query string, each parameter once and known (a misspelt one would silently leave TLS off).
function queryParams(url: URL, option: string): Map<string, string> {
  const params = new Map<string, string>();
  for (const [name, value] of url.searchParams) {
    const key = name.toLowerCase().replace(/_/g, '-');
    if (!PARAMS.has(key)) throw new UsageError(`${option}: unknown parameter '${name}' (use ${[...PARAMS].join(', ')})`);
    if (params.has(key)) throw new UsageError(`${option}: parameter '${name}' given twice`);
    params.set(key, value);
  }
  return params;
}

// ssl-mode as MySQL's client spells it (DISABLED ... VERIFY_IDENTITY), or ssl=true|false.
// Without either: off on the loopback and a socket, where it protects nothing; 'preferred'
// (TLS when the server offers it) elsewhere, MySQL's own default.
function sslMode(params: Map<string, string>, option: string, local: boolean): MysqlSslMode {
  const mode = params.get('ssl-mode');
  const ssl = params.get('ssl');
  if (mode !== undefined && ssl !== undefined) throw new UsageError(`${option}: give ssl-mode or ssl, not both`);
  if (ssl !== undefined) {
    if (/^(true|1|on|required)$/i.test(ssl)) return 'required';
    if (/^(false|0|off|disabled)$/i.test(ssl)) return 'disabled';
    throw new UsageError(`${option}: ssl '${ssl}' is not true or false`);
  }
  if (mode === undefined) return local ? 'disabled' : 'preferred';
  const normal = mode.toLowerCase().replace(/-/g, '_') as MysqlSslMode;
  if (!MYSQL_SSL_MODES.includes(normal)) throw new UsageError(`${option}: ssl-mode '${mode}' is not one of ${MYSQL_SSL_MODES.join(', ')}`);
  return normal;
}

// The database of cronguard's tables: a plain name, not one of the server's own.
export function resolveMysqlSchema(setting: Setting | undefined): string {
  const schema = setting?.value ?? DEFAULT_MYSQL_SCHEMA;
  const option = setting === undefined || setting.from.startsWith('--') ? '--schema' : `schema (${setting.from})`;
  if (!SCHEMA.test(schema)) throw new UsageError(`${option}: '${schema}' is not a plain database name (letters, digits, _; at most 64)`);
  if (SYSTEM.has(schema.toLowerCase())) throw new UsageError(`${option}: '${schema}' is a MySQL system database; choose another name`);
  return schema;
}

function isLocal(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}
