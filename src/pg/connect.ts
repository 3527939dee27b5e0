import { CronguardError } from '../errors.js';
import { sleep } from '../util/io.js';
import { pgpassWarnings } from './client-config.js';
import { type DbConfig, pgError } from './config.js';

export { BUSY_RETRY_MS } from './config.js';
import { PgSession } from './session.js';
import { noFreeSlot } from './slots.js';

// Errors that pass: no free connection slot (a fleet connecting at the top of the minute)
// or a server still starting up.
const BUSY = new Set(['53300', '57P03']);
const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 1000;

export interface ConnectOptions {
  // How long to keep retrying while the server is busy.
  readonly retryForMs: number;
  readonly onRetry?: (retry: number, delayMs: number, reason: string) => void;
  // A signal to cronguard: stops connecting, and waiting to, at once (a server that never
  // answers would hold it for the connect timeout, a busy one for all of -w).
  readonly abort?: AbortSignal;
}

// A dedicated session: one attempt, a second with or without TLS as the sslmode says, and
// while the server is busy, more after a jittered, growing delay, up to retryForMs. Every
// failure ends as one of the contract's errors (69, 77).
export async function connect(db: DbConfig, applicationName: string, options: ConnectOptions): Promise<PgSession> {
  const deadline = Date.now() + options.retryForMs;
  const { abort } = options;
  for (let retry = 1; ; retry++) {
    try {
      abort?.throwIfAborted();
      return await attempt(db, applicationName, abort);
    } catch (error) {
      if (error instanceof CronguardError || abort?.aborted) throw error;
      const code = (error as { code?: string }).code ?? '';
      const delay = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (retry - 1)) * (0.5 + Math.random() / 2);
      if (code === '53300' && Date.now() + delay > deadline) throw noFreeSlot((error as Error).message, db.display, retry - 1);
      if (!BUSY.has(code) || Date.now() + delay > deadline) {
        const mapped = pgError(withPgpassNote(error), db.display);
        if (BUSY.has(code) && retry > 1) mapped.message += ` (retried ${retry - 1} times)`;
        throw mapped;
      }
      options.onRetry?.(retry, Math.round(delay), (error as Error).message);
      await sleep(delay, abort);
    }
  }
}

// 'prefer' tries TLS first and 'allow' plain first; each falls back to the other once.
async function attempt(db: DbConfig, applicationName: string, abort: AbortSignal | undefined): Promise<PgSession> {
  const mode = db.connection.sslmode;
  const tlsFirst = mode !== 'allow' && mode !== 'disable';
  try {
    return await PgSession.open(db, applicationName, tlsFirst, abort);
  } catch (error) {
    const fallBack =
      (mode === 'prefer' && /does not support SSL/.test((error as Error).message)) ||
      (mode === 'allow' && (error as { code?: string }).code === '28000');
    if (!fallBack || abort?.aborted) throw error;
  }
  return PgSession.open(db, applicationName, !tlsFirst, abort);
}

// A refused login is easier to fix when it says why ~/.pgpass was not used.
function withPgpassNote(error: unknown): unknown {
  if (pgpassWarnings.length === 0 || !(error instanceof Error)) return error;
  return Object.assign(new Error(`${error.message} (${pgpassWarnings.join('; ')})`), { code: (error as { code?: string }).code });
}
