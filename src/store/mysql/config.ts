// A MySQL or MariaDB server as --db names it (mysql://, mariadb://; parsed in url.ts). The
// driver gets these fields, never the URL.

export const MYSQL_SSL_MODES = ['disabled', 'preferred', 'required', 'verify_ca', 'verify_identity'] as const;
export type MysqlSslMode = (typeof MYSQL_SSL_MODES)[number];

export interface MysqlConfig {
  // Tells the configs of the fleet's database apart (PostgreSQL's is 'postgres').
  readonly dialect: 'mysql';
  readonly host: string;
  readonly port: number;
  // A Unix socket instead of host:port (?socket=/run/mysqld/mysqld.sock).
  readonly socket: string | undefined;
  readonly user: string;
  readonly password: string | undefined;
  // The database the session connects to (the URL's path; none by default). The tables
  // live in `schema`, named in every statement.
  readonly database: string | undefined;
  // The database holding cronguard's tables (--schema; cronguard by default).
  readonly schema: string;
  readonly sslMode: MysqlSslMode;
  readonly sslCa: string | undefined;
  readonly sslCert: string | undefined;
  readonly sslKey: string | undefined;
  readonly connectTimeoutMs: number;
  // user@host:port/database for messages: never the password.
  readonly display: string;
  // As DbConfig's (store/postgres/config.ts).
  readonly place: string;
  // Where the URL came from (a flag, a variable, a file and line), for -v.
  readonly from: string;
}
