import { type CronguardError, PermissionError, UnavailableError, UsageError } from '../errors.js';

type Env = Readonly<Record<string, string | undefined>>;

// Where the shared lock and run log live. `url` undefined means the pg driver builds the
// connection from libpq's PG* variables alone.
export interface DbConfig {
  readonly url: string | undefined;
  // host:port/database for messages: never the password.
  readonly display: string;
  readonly schema: string;
}

const SCHEMA = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

// A database is configured by --db, CRONGUARD_DATABASE_URL, or libpq's PGHOST/PGDATABASE.
export function resolveDb(flag: string | undefined, schemaFlag: string | undefined, env: Env): DbConfig | null {
  const url = flag ?? (env.CRONGUARD_DATABASE_URL || undefined);
  if (url === undefined && !env.PGHOST && !env.PGDATABASE) return null;
  if (url !== undefined && !/^postgres(ql)?:\/\//.test(url)) {
    throw new UsageError(`--db: expected a postgres:// or postgresql:// URL, got '${redact(url)}'`);
  }
  const schema = schemaFlag ?? (env.CRONGUARD_SCHEMA || 'cronguard');
  if (!SCHEMA.test(schema)) {
    throw new UsageError(`--schema: '${schema}' is not a plain identifier (letters, digits, _; at most 63)`);
  }
  return Object.freeze({ url, display: url === undefined ? fromEnv(env) : describeUrl(url), schema });
}

function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    const db = u.pathname.replace(/^\//, '') || u.username || 'postgres';
    return `${u.hostname || u.searchParams.get('host') || 'localhost'}:${u.port || 5432}/${decodeURIComponent(db)}`;
  } catch {
    throw new UsageError(`--db: '${redact(url)}' is not a valid URL`);
  }
}

function fromEnv(env: Env): string {
  return `${env.PGHOST || 'localhost'}:${env.PGPORT || 5432}/${env.PGDATABASE || env.PGUSER || 'postgres'}`;
}

// Hides a password in anything that looks like a URL with credentials.
export function redact(text: string): string {
  return text.replace(/(\/\/[^:/@\s]*:)[^@\s]*@/g, '$1***@');
}

const NETWORK = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'EPIPE']);

// Maps a failure to reach or log in to PostgreSQL onto the contract's exit codes: refused
// logins and missing privileges are 77, everything that makes the server unreachable 69.
export function pgError(error: unknown, where: string): CronguardError {
  const e = error as { code?: string; message?: string };
  const code = e?.code ?? '';
  const message = redact(e?.message ?? String(error));
  if (code === '28P01' || code === '28000') return new PermissionError(`PostgreSQL at ${where} refused the login: ${message}`);
  if (code === '42501') return new PermissionError(`PostgreSQL at ${where}: ${message}`);
  if (code === '3D000') return new UnavailableError(`PostgreSQL at ${where}: ${message}`);
  if (NETWORK.has(code)) return new UnavailableError(`cannot reach PostgreSQL at ${where}: ${code}`);
  return new UnavailableError(`PostgreSQL at ${where}: ${message}`);
}
