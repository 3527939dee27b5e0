import { UsageError } from '../../errors.js';

// The parts of a libpq connection string that cronguard uses, still as text and not yet
// merged with the PG* variables. Parsed here rather than by the driver so that a bad value
// is a usage error that names the part, and nothing of the string (its password) is ever
// echoed. `hosts` and `ports` are libpq's comma-separated lists, one entry per host.
export interface UriParts {
  user?: string;
  password?: string;
  hosts?: string[];
  ports?: string[];
  dbname?: string;
  params: Map<string, string>;
}

// Parameters libpq knows and cronguard honours.
export const URI_PARAMS = new Set([
  'host', 'port', 'dbname', 'user', 'password', 'sslmode', 'sslcert', 'sslkey', 'sslrootcert',
  'connect_timeout', 'options', 'target_session_attrs',
]);

// libpq parameters that change nothing that matters to cronguard (it names its own session,
// keeps its own keepalives, tries hosts in order): accepted and ignored, so a string shared
// with other tools works. The rest (a service file, GSSAPI, client-side certificate
// revocation...) are refused rather than silently weakened.
const IGNORED_PARAMS = new Set([
  'application_name', 'fallback_application_name', 'keepalives', 'keepalives_idle', 'keepalives_interval',
  'keepalives_count', 'tcp_user_timeout', 'load_balance_hosts', 'client_encoding',
]);

// libpq's other keywords, named when refused: a word not among them may be a piece of a
// password that lost its quotes, and is not echoed.
const LIBPQ_KEYWORDS = new Set([
  'hostaddr', 'service', 'passfile', 'require_auth', 'channel_binding', 'sslpassword', 'sslcrl', 'sslcrldir', 'sslsni',
  'sslcompression', 'ssl_min_protocol_version', 'ssl_max_protocol_version', 'sslnegotiation', 'sslcertmode', 'sslkeylogfile',
  'requirepeer', 'gssencmode', 'krbsrvname', 'gsslib', 'gssdelegation', 'replication', 'scram_client_key', 'scram_server_key',
  'min_protocol_version', 'max_protocol_version', 'oauth_issuer', 'oauth_client_id', 'oauth_client_secret', 'oauth_scope',
]);

// A libpq connection string in either form: a URI (postgresql://...) or keyword/value pairs
// (host=db1 dbname=ops ...). Which one, as libpq decides: by the URI's scheme.
export function parseConnectionString(text: string, option: string): UriParts {
  if (/^postgres(?:ql)?:\/\//.test(text)) return parseUri(text, option);
  if (/^\s*[A-Za-z_]+\s*=/.test(text)) return parseKeywords(text, option);
  throw new UsageError(`${option}: expected a URL starting with postgres://, postgresql://, mysql:// or mariadb://, or libpq keyword=value pairs`);
}

// postgresql://[user[:password]@][host][:port][,host[:port]...][/dbname][?param=value&...]
export function parseUri(uri: string, option: string): UriParts {
  const scheme = /^postgres(?:ql)?:\/\//.exec(uri);
  if (!scheme) {
    throw new UsageError(`${option}: expected a URL starting with postgres://, postgresql://, mysql:// or mariadb://`);
  }
  let rest = uri.slice(scheme[0].length);
  const parts: UriParts = { params: new Map() };
  const q = rest.indexOf('?');
  if (q >= 0) {
    for (const pair of rest.slice(q + 1).split('&')) {
      if (pair === '') continue;
      const eq = pair.indexOf('=');
      const key = decode(eq < 0 ? pair : pair.slice(0, eq), option, 'a parameter name');
      // A name that is not a plain word may be part of a password with a raw '?' in it.
      const shown = /^[a-z_]{1,40}$/.test(key) ? `'${key}'` : 'in the URL (a password with ? / # or @ must be %-encoded)';
      setParam(parts, key, decode(eq < 0 ? '' : pair.slice(eq + 1), option, `parameter ${key}`), option, shown);
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
  // libpq's multi-host form: host[:port] entries separated by commas; an IPv6 address in
  // brackets may hold colons.
  const list = authority.slice(at + 1);
  if (list !== '') {
    const hosts: string[] = [];
    const ports: string[] = [];
    for (const entry of list.split(/,(?![^[]*\])/)) {
      const m = /^(\[[^\]]*\]|[^:]*)(?::(.*))?$/.exec(entry) as RegExpExecArray;
      hosts.push(decode((m[1] as string).replace(/^\[(.*)\]$/, '$1'), option, 'the host'));
      ports.push(m[2] ?? '');
    }
    parts.hosts = hosts;
    if (ports.some((p) => p !== '')) parts.ports = ports;
  }
  return parts;
}

// host=db1 port=5432 dbname=ops password='it''s' ...: libpq's rules. Pairs are separated by
// white space, which may also surround '='; a value with spaces is quoted in single quotes;
// a backslash takes the next character as it is, quoted or not (\' and \\).
export function parseKeywords(text: string, option: string): UriParts {
  const parts: UriParts = { params: new Map() };
  let i = 0;
  const space = () => {
    while (i < text.length && /\s/.test(text[i] as string)) i++;
  };
  for (space(); i < text.length; space()) {
    const start = i;
    while (i < text.length && !/[\s=]/.test(text[i] as string)) i++;
    const key = text.slice(start, i);
    space();
    if (key === '' || text[i] !== '=') {
      throw new UsageError(`${option}: expected keyword=value pairs (a value with spaces must be in single quotes: password='a b')`);
    }
    i++;
    space();
    let value = '';
    const quoted = text[i] === "'";
    if (quoted) i++;
    for (;;) {
      const c = text[i];
      if (c === undefined) {
        if (quoted) throw new UsageError(`${option}: a quoted value is not closed (a quote inside a value is written \\')`);
        break;
      }
      if (quoted ? c === "'" : /\s/.test(c)) {
        if (quoted) i++;
        break;
      }
      if (c === '\\' && i + 1 < text.length) i++;
      value += text[i];
      i++;
    }
    const shown = LIBPQ_KEYWORDS.has(key) || URI_PARAMS.has(key) ? `'${key}'` : '(an unknown keyword; a value with spaces must be in single quotes)';
    setParam(parts, key, value, option, shown);
  }
  return parts;
}

function setParam(parts: UriParts, key: string, value: string, option: string, shown: string): void {
  if (IGNORED_PARAMS.has(key)) return;
  if (!URI_PARAMS.has(key)) throw new UsageError(`${option}: unsupported connection parameter ${shown}`);
  parts.params.set(key, value);
}

function decode(text: string, option: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new UsageError(`${option}: ${what} has a malformed %-escape`);
  }
}
