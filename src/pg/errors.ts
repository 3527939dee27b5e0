import { type CronguardError, PermissionError, UnavailableError } from '../errors.js';
import { redact } from './config.js';

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
