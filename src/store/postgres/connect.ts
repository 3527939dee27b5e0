import { CronguardError, UnavailableError } from '../../errors.js';
import { pgpassWarnings } from './client-config.js';
import { atServer, type DbConfig, pgError, type Server } from './config.js';

export { BUSY_RETRY_MS } from './config.js';

import { connectRetrying, type RetryOptions } from '../connect-retry.js';
import { noFreeSlot } from './connection-slots.js';
import { accepts, askedState, describeState, type ServerState, serverState, standbyRefusal } from './server-state.js';
import { PgSession } from './session.js';

// Errors that pass: no free connection slot (a fleet connecting at the top of the minute)
// or a server still starting up.
const BUSY = new Set(['53300', '57P03']);

export interface ConnectOptions extends RetryOptions {
  // The session takes locks and writes (a run): a standby is refused (69), whichever
  // target_session_attrs led to it, before anything is done on it.
  readonly primary?: boolean;
}

// Why one server of the list was not kept: it could not be reached (error), or it was not
// what target_session_attrs asks for (state).
interface Passed {
  readonly server: Server;
  readonly error?: unknown;
  readonly state?: ServerState;
}

// A dedicated session: the servers of the list tried in order, as libpq tries them (the next
// one when a server cannot be reached or is not what target_session_attrs asks for), each
// with a second attempt with or without TLS as the sslmode says; while a server is busy, the
// list again after a jittered, growing delay, up to retryForMs. Every failure ends as one of
// the contract's errors (69, 77).
export async function connect(db: DbConfig, applicationName: string, options: ConnectOptions): Promise<PgSession> {
  return connectRetrying<PgSession>(options, async () => {
    const reached = await reach(db, applicationName, options.abort, options.primary === true);
    if (!Array.isArray(reached)) {
      if (options.primary && reached.state?.standby) await refuseStandby(reached.session);
      return { session: reached.session };
    }
    const busy = reached.find((p) => BUSY.has(codeOf(p.error)));
    const end = (retries: number): Error => {
      // A single server out of slots: the line names which limit it reached.
      if (busy && codeOf(busy.error) === '53300' && reached.length === 1) return noFreeSlot((busy.error as Error).message, busy.server.display, retries);
      const error = failure(db, reached);
      if (busy && retries > 0) error.message += ` (retried ${retries} times)`;
      return error;
    };
    return { busy: busy ? (busy.error as Error).message : null, failure: end };
  });
}

// The first server of the list that answers and suits target_session_attrs (with
// prefer-standby, the first that answers when none is a standby), or why each did not. What
// the server is gets known when target_session_attrs or `primary` needs it.
async function reach(
  db: DbConfig,
  applicationName: string,
  abort: AbortSignal | undefined,
  primary: boolean,
): Promise<{ session: PgSession; state?: ServerState } | Passed[]> {
  const attrs = db.targetSessionAttrs;
  const passed: Passed[] = [];
  let fallback: { session: PgSession; state: ServerState } | null = null;
  const fail = async (error: unknown) => {
    await fallback?.session.close();
    throw error;
  };
  for (const server of db.servers) {
    let session: PgSession;
    try {
      session = await attempt(atServer(db, server), applicationName, abort);
    } catch (error) {
      if (error instanceof CronguardError || abort?.aborted) return fail(error);
      passed.push({ server, error });
      continue;
    }
    if (attrs === 'any' && !primary) return { session };
    let state: ServerState;
    try {
      state = await stateOf(session, abort, serverState);
      // Turned away (or a run refused) only on the server's own word: a reported standby may
      // be a pooler's memory of a server promoted since, which would be refused for ever.
      const keeps = accepts(attrs, state) && !(primary && state.standby);
      if (state.reported && !keeps) state = await stateOf(session, abort, askedState);
    } catch (error) {
      await session.close();
      if (abort?.aborted) return fail(error);
      passed.push({ server, error });
      continue;
    }
    if (accepts(attrs, state)) {
      await fallback?.session.close();
      return { session, state };
    }
    if (attrs === 'prefer-standby' && fallback === null) fallback = { session, state };
    else await session.close();
    passed.push({ server, state });
  }
  return fallback ?? passed;
}

// Asking the server what it is ends with `abort`, as connecting does: a pooler with no server
// behind it would hold the answer for good.
async function stateOf(session: PgSession, abort: AbortSignal | undefined, how: (session: PgSession) => Promise<ServerState>): Promise<ServerState> {
  if (!abort) return how(session);
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(abort.reason);
    abort.addEventListener('abort', onAbort, { once: true });
  });
  try {
    abort.throwIfAborted();
    return await Promise.race([how(session), aborted]);
  } finally {
    abort.removeEventListener('abort', onAbort);
  }
}

async function refuseStandby(session: PgSession): Promise<never> {
  await session.close();
  throw standbyRefusal(session.db.display);
}

// One line for a list that gave no session: the last error that kept a server out of
// reach, in the contract's terms (77 for a refused login, else 69), naming the others.
function failure(db: DbConfig, passed: Passed[]): CronguardError {
  const others = (except: Passed | undefined) =>
    passed.filter((p) => p !== except).map((p) => `${p.server.display}: ${p.state ? describeState(p.state) : codeOf(p.error) || (p.error as Error)?.message}`);
  const unreachable = passed.filter((p) => p.error !== undefined).at(-1);
  if (unreachable) {
    const error = pgError(withPgpassNote(unreachable.error), unreachable.server.display);
    const rest = others(unreachable);
    if (rest.length > 0) error.message += ` (also tried ${rest.join('; ')})`;
    return error;
  }
  return new UnavailableError(`no server of ${db.display} is what target_session_attrs=${db.targetSessionAttrs} asks for: ${others(undefined).join('; ')}`);
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

function codeOf(error: unknown): string {
  return (error as { code?: string } | undefined)?.code ?? '';
}

// A refused login is easier to fix when it says why ~/.pgpass was not used.
function withPgpassNote(error: unknown): unknown {
  if (pgpassWarnings.length === 0 || !(error instanceof Error)) return error;
  return Object.assign(new Error(`${error.message} (${pgpassWarnings.join('; ')})`), { code: (error as { code?: string }).code });
}
