import { UsageError } from '../errors.js';

// The parts of a libpq connection URI that cronguard uses, still as text and not yet merged
// with the PG* variables. Parsed here rather than by the driver so that a bad value is a
// usage error that names the part, and nothing of the URI (its password) is ever echoed.
export interface UriParts {
  user?: string;
  password?: string;
  host?: string;
  port?: string;
  dbname?: string;
  params: Map<string, string>;
}

// Query parameters libpq knows and cronguard honours.
export const URI_PARAMS = new Set([
  'host', 'port', 'dbname', 'user', 'password', 'sslmode', 'sslcert', 'sslkey', 'sslrootcert',
  'connect_timeout', 'options',
]);

// libpq parameters that change nothing that matters to cronguard (it names its own session,
// keeps its own keepalives, writes to whichever server it reaches): accepted and ignored, so
// a URL shared with other tools works. The rest (a service file, GSSAPI, client-side
// certificate revocation...) are refused rather than silently weakened.
const IGNORED_PARAMS = new Set([
  'application_name', 'fallback_application_name', 'keepalives', 'keepalives_idle', 'keepalives_interval',
  'keepalives_count', 'tcp_user_timeout', 'target_session_attrs', 'load_balance_hosts', 'client_encoding',
]);

// postgresql://[user[:password]@][host][:port][/dbname][?param=value&...]
export function parseUri(uri: string, option: string): UriParts {
  const scheme = /^postgres(?:ql)?:\/\//.exec(uri);
  if (!scheme) {
    throw new UsageError(`${option}: expected a URL starting with postgres:// or postgresql://`);
  }
  let rest = uri.slice(scheme[0].length);
  const parts: UriParts = { params: new Map() };
  const q = rest.indexOf('?');
  if (q >= 0) {
    for (const pair of rest.slice(q + 1).split('&')) {
      if (pair === '') continue;
      const eq = pair.indexOf('=');
      const key = decode(eq < 0 ? pair : pair.slice(0, eq), option, 'a parameter name');
      if (IGNORED_PARAMS.has(key)) continue;
      if (!URI_PARAMS.has(key)) {
        // A name that is not a plain word may be part of a password with a raw '?' in it.
        const shown = /^[a-z_]{1,40}$/.test(key) ? `'${key}'` : 'in the URL (a password with ? / # or @ must be %-encoded)';
        throw new UsageError(`${option}: unsupported connection parameter ${shown}`);
      }
      parts.params.set(key, decode(eq < 0 ? '' : pair.slice(eq + 1), option, `parameter ${key}`));
    }
    rest = rest.slice(0, q);
  }
  const slash = rest.indexOf('/');
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  if (slash >= 0 && slash < rest.length - 1) parts.dbname = decode(rest.slice(slash + 1), option, 'the database name');
  // The last '@' ends the credentials, so an unencoded '@' in a password still parses.
  const at = authority.lastIndexOf('@');
  if (at >= 0) {
    const credentials = authority.slice(0, at);
    const colon = credentials.indexOf(':');
    const user = colon < 0 ? credentials : credentials.slice(0, colon);
    if (user !== '') parts.user = decode(user, option, 'the user name');
    if (colon >= 0) parts.password = decode(credentials.slice(colon + 1), option, 'the password');
  }
  const hostPort = authority.slice(at + 1);
  const m = /^(\[[^\]]*\]|[^:]*)(?::(.*))?$/.exec(hostPort) as RegExpExecArray;
  const host = (m[1] as string).replace(/^\[(.*)\]$/, '$1');
  if (host !== '') parts.host = decode(host, option, 'the host');
  if (m[2] !== undefined && m[2] !== '') parts.port = m[2];
  return parts;
}

function decode(text: string, option: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new UsageError(`${option}: ${what} has a malformed %-escape`);
  }
}
