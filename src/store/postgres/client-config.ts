import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { Writable } from 'node:stream';
import type { ClientConfig } from 'pg';
import pgpass from 'pgpass';
import { withExtraCa } from '../../util/extra-ca.js';
import { readRegularFile } from '../../util/safe-path.js';
import type { Connection } from './config.js';

// The driver's settings for one connection attempt. `tls` says whether this attempt uses TLS
// (sslmode prefer and allow try both ways).
export function clientConfig(conn: Connection, tls: boolean): ClientConfig {
  return {
    host: conn.host,
    port: conn.port,
    user: conn.user,
    database: conn.database,
    // pg's own pgpass lookup prints a deprecation warning into cron mail; it accepts a
    // function whose undefined means "no password", though its types do not say so.
    password: conn.password ?? ((() => fromPgpass(conn)) as () => Promise<string>),
    ssl: tls ? tlsOptions(conn) : false,
    // Only the user's own (options=, $PGOPTIONS): a pooler refuses the startup parameter
    // (PgBouncer: "unsupported startup parameter") or drops it when told to ignore it, so
    // nothing cronguard needs travels there. DateStyle is set after login (PgSession.open);
    // the bounds of the run log's writes live on its functions (migration 0013).
    ...(conn.options ? { options: conn.options } : {}),
  };
}

// libpq's meaning of each sslmode: require encrypts without checking the server (unless a
// root certificate is given), verify-ca checks the chain, verify-full also the host name.
function tlsOptions(conn: Connection): NonNullable<ClientConfig['ssl']> {
  const rootFile = conn.sslrootcert ?? defaultRootCert();
  const verify = conn.sslmode === 'verify-ca' || conn.sslmode === 'verify-full' || (conn.sslmode === 'require' && conn.sslrootcert !== undefined);
  const options = {
    rejectUnauthorized: verify,
    ...(verify && rootFile && rootFile !== 'system' ? { ca: readRegularFile(rootFile, 'sslrootcert') } : {}),
    ...(verify && conn.sslmode !== 'verify-full' ? { checkServerIdentity: () => undefined } : {}),
    ...(conn.sslcert ? { cert: readRegularFile(conn.sslcert, 'sslcert') } : {}),
    ...(conn.sslkey ? { key: readRegularFile(conn.sslkey, 'sslkey') } : {}),
  };
  // Checked against the default roots: those include NODE_EXTRA_CA_CERTS.
  return verify ? withExtraCa(options) : options;
}

function defaultRootCert(): string | undefined {
  const file = `${homedir()}/.postgresql/root.crt`;
  return existsSync(file) ? file : undefined;
}

// The password from ~/.pgpass (or $PGPASSFILE), matched as libpq matches it: a socket
// connection is "localhost". pgpass's own warnings (a file others can read is ignored) are
// kept and shown only if the login then fails for want of a password.
export const pgpassWarnings: string[] = [];

function fromPgpass(conn: Connection): Promise<string | undefined> {
  pgpass.warnTo(
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        pgpassWarnings.push(chunk.toString().trim());
        done();
      },
    }),
  );
  const host = conn.host.startsWith('/') ? 'localhost' : conn.host;
  return new Promise((resolve) => pgpass({ host, port: conn.port, database: conn.database, user: conn.user }, resolve));
}
