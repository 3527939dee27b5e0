import { rootCertificates } from 'node:tls';
import type { Connection, ConnectionOptions } from 'mysql2/promise';
import { readRegularFile } from '../../util/safe-path.js';
import { connectRetrying, type RetryOptions } from '../connect-retry.js';
import type { MysqlConfig } from './config.js';
import { Session } from './connection.js';
import { isBusyError, mysqlError, serverErrno } from './errors.js';
import type { MysqlSession } from './session.js';

// A server with no free connection (1040, 1203) is retried (see connect-retry.ts).
export interface MysqlConnectOptions extends RetryOptions {
  // The server ends the session after this many seconds without a statement (the lock's:
  // see lock.ts); the server's wait_timeout otherwise.
  readonly idleTimeoutS?: number;
}

// A dedicated session, retried after a jittered, growing delay while the server is out of
// connections (a fleet connecting at the top of the minute), up to retryForMs. Every failure
// ends as one of the contract's errors (69, 77), naming the server, never the password.
export async function connectMysqlServer(config: MysqlConfig, applicationName: string, options: MysqlConnectOptions): Promise<MysqlSession> {
  const { abort } = options;
  return connectRetrying<MysqlSession>(options, async () => {
    try {
      return { session: await attempt(config, applicationName, abort, options.idleTimeoutS) };
    } catch (error) {
      if (abort?.aborted) throw abort.reason;
      const failure = (retries: number): Error => {
        const failed = mysqlError(error, config.display);
        if (retries > 0) failed.message += ` (retried ${retries} times)`;
        // MariaDB's answer to a plain connection under require_secure_transport.
        if (config.sslMode === 'disabled' && serverErrno(error) === 1045) failed.message += '; if the server requires TLS, set ssl-mode=required in the URL';
        return failed;
      };
      return { busy: isBusyError(error) ? (error as Error).message : null, failure };
    }
  });
}

// ssl-mode=preferred: TLS when the server offers it, else the same connection without, as
// MySQL's own client does.
async function attempt(config: MysqlConfig, applicationName: string, abort: AbortSignal | undefined, idleTimeoutS?: number): Promise<MysqlSession> {
  try {
    return await connectMysql(config, applicationName, abort, idleTimeoutS);
  } catch (error) {
    if (config.sslMode !== 'preferred' || (error as { code?: string }).code !== 'HANDSHAKE_NO_SSL_SUPPORT' || abort?.aborted) throw error;
  }
  return connectMysql({ ...config, sslMode: 'disabled' }, applicationName, abort, idleTimeoutS);
}

// Every session, in one statement: UTC for NOW() and TIMESTAMP columns, whatever the
// server's zone (the driver reads and writes DATETIME as UTC too, see connectMysql); a row
// lock waited for at most 5 s (the server's default is 50), as the PostgreSQL log's
// lock_timeout: a run never hangs behind a stuck writer, and a record reconnecting gives up
// after that (RECORD_GIVE_UP_MS); and a known sql_mode, whatever the server's default: the
// driver escapes values with backslashes, which NO_BACKSLASH_ESCAPES would read as a quote
// ending the string (broken statements, or injected SQL), ANSI_QUOTES would make its
// "strings" names, and strict mode makes an over-long value an error, not a silent cut.
// lock_wait_timeout bounds a wait for a table's metadata lock the same way (LOCK TABLES, a
// backup's FLUSH TABLES WITH READ LOCK, an ALTER waiting: a day by default); migrations lift
// it for their DDL (migrations.ts).
export const LOCK_WAIT_S = 5;
const SESSION_SETUP = `SET time_zone = '+00:00', innodb_lock_wait_timeout = ${LOCK_WAIT_S}, lock_wait_timeout = ${LOCK_WAIT_S}, sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'`;
// The largest packet the server takes (a statement's, with its values): a run's output is cut
// to fit it (rows.ts), or its outcome would be refused and the connection dropped.
const MAX_PACKET = 'SELECT @@max_allowed_packet AS max_packet';
// MySQL 5.7's default, the smallest a server of ours is likely to have.
const DEFAULT_MAX_PACKET = 4 * 1024 * 1024;

// One dedicated connection, not a pool: GET_LOCK lives exactly as long as it. The driver is
// loaded here, on first use, so that runs of the other stores never load it.
//
// Values as rows carry them: DATETIME and TIMESTAMP as Date (UTC, millisecond precision,
// which is what a Date holds: columns should be DATETIME(3)); BIGINT as number, or as a
// decimal string beyond 2^53 (supportBigNumbers); JSON as its text, as MariaDB (whose JSON
// is LONGTEXT) returns it, so both servers give the same. Statements go in the text
// protocol with the driver's `?` escaping: a prepared statement costs a round trip more on
// a connection that sends each statement once.
export async function connectMysql(config: MysqlConfig, applicationName: string, abort?: AbortSignal, idleTimeoutS?: number): Promise<MysqlSession> {
  const driver = await import('mysql2/promise');
  // Bundled as CommonJS, the module's exports may come as its default export.
  const { createConnection } = (driver as unknown as { default?: typeof driver }).default ?? driver;
  abort?.throwIfAborted();
  const options: ConnectionOptions = {
    ...(config.socket ? { socketPath: config.socket } : { host: config.host, port: config.port }),
    user: config.user,
    password: config.password,
    database: config.database,
    ssl: sslOptions(config),
    charset: 'utf8mb4_unicode_ci',
    timezone: 'Z',
    dateStrings: false,
    supportBigNumbers: true,
    bigNumberStrings: false,
    jsonStrings: true,
    connectTimeout: config.connectTimeoutMs,
    // Several statements in one packet (MysqlSession.batch): a run's lock and record in a
    // few round trips, without stored routines. Values still go only through `?` escaping,
    // under a known sql_mode (SESSION_SETUP).
    multipleStatements: true,
    enableKeepAlive: true,
    keepAliveInitialDelay: 1000,
    // Shown in SHOW PROCESSLIST's neighbours (performance_schema.session_connect_attrs).
    connectAttributes: { program_name: applicationName.slice(0, 64) },
  };
  let connection: Connection | undefined;
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(abort?.reason);
    abort?.addEventListener('abort', onAbort, { once: true });
  });
  const connecting = createConnection(options).then((c) => {
    connection = c;
    return c;
  });
  try {
    const c = await Promise.race([connecting, aborted]);
    const setup = idleTimeoutS === undefined ? SESSION_SETUP : `${SESSION_SETUP}, wait_timeout = ${Math.trunc(idleTimeoutS)}`;
    const [results] = await Promise.race([c.query(`${setup}; ${MAX_PACKET}`), aborted]);
    // The SET's header, then the SELECT's rows (a stand-in server may answer with less).
    const rows = Array.isArray(results) && Array.isArray(results[1]) ? (results[1] as { max_packet?: number | string }[]) : [];
    return new Session(c, config, Number(rows[0]?.max_packet ?? 0) || DEFAULT_MAX_PACKET);
  } catch (error) {
    // An aborted attempt may still connect: that connection is dropped when it does.
    connecting.then((c) => c.destroy(), () => {});
    connection?.destroy();
    throw error;
  } finally {
    abort?.removeEventListener('abort', onAbort);
  }
}

// The roots a verified connection without ssl-ca trusts when NODE_EXTRA_CA_CERTS names more:
// the launcher defers that file (util/extra-ca.ts) and the driver builds its own TLS context,
// so Node's roots and the file's certificates are handed over together. A file that cannot
// be read is skipped with a warning, as Node skips it; undefined: Node's roots alone.
function extraRoots(): string[] | undefined {
  const file = process.env.NODE_EXTRA_CA_CERTS;
  if (!file) return undefined;
  let pem: string;
  try {
    pem = readRegularFile(file, 'NODE_EXTRA_CA_CERTS', 16 * 1024 * 1024);
  } catch (error) {
    process.emitWarning(`ignoring extra certs: ${(error as Error).message}`);
    return undefined;
  }
  return [...rootCertificates, pem];
}

// TLS as ?ssl-mode says; 'preferred' is tried with TLS first and falls back in connect.ts.
function sslOptions(config: MysqlConfig): ConnectionOptions['ssl'] {
  if (config.sslMode === 'disabled') return undefined;
  // A missing file is 64, an unreadable one 77, before anything is sent.
  const read = (path: string | undefined, what: string) => (path === undefined ? undefined : readRegularFile(path, what));
  const verify = config.sslMode === 'verify_ca' || config.sslMode === 'verify_identity';
  return {
    ca: read(config.sslCa, 'ssl-ca') ?? (verify ? extraRoots() : undefined),
    cert: read(config.sslCert, 'ssl-cert'),
    key: read(config.sslKey, 'ssl-key'),
    // preferred and required encrypt without checking the server, as MySQL's client does;
    // verify_ca checks its certificate's chain, verify_identity also that it names the host
    // (an IP address too: see build.mjs's patch of the driver).
    rejectUnauthorized: verify,
    verifyIdentity: config.sslMode === 'verify_identity',
  };
}
