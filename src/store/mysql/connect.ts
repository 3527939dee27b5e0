import { sleep } from '../../util/io.js';
import { monotonicMs } from '../../util/time.js';
import type { MysqlConfig } from './config.js';
import { isBusyError, mysqlError, serverErrno } from './errors.js';
import { connectMysql, type MysqlSession } from './session.js';

const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 1000;

export interface MysqlConnectOptions {
  // How long to keep retrying while the server has no free connection (1040, 1203).
  readonly retryForMs: number;
  readonly onRetry?: (retry: number, delayMs: number, reason: string) => void;
  // A signal to cronguard: stops connecting, and waiting to, at once.
  readonly abort?: AbortSignal;
  // The server ends the session after this many seconds without a statement (the lock's:
  // see lock.ts); the server's wait_timeout otherwise.
  readonly idleTimeoutS?: number;
}

// A dedicated session, retried after a jittered, growing delay while the server is out of
// connections (a fleet connecting at the top of the minute), up to retryForMs. Every failure
// ends as one of the contract's errors (69, 77), naming the server, never the password.
export async function connectMysqlServer(config: MysqlConfig, applicationName: string, options: MysqlConnectOptions): Promise<MysqlSession> {
  const deadline = monotonicMs() + options.retryForMs;
  const { abort } = options;
  for (let retry = 1; ; retry++) {
    abort?.throwIfAborted();
    try {
      return await attempt(config, applicationName, abort, options.idleTimeoutS);
    } catch (error) {
      if (abort?.aborted) throw abort.reason;
      const delay = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (retry - 1)) * (0.5 + Math.random() / 2);
      if (!isBusyError(error) || monotonicMs() + delay > deadline) {
        const failed = mysqlError(error, config.display);
        if (retry > 1) failed.message += ` (retried ${retry - 1} times)`;
        // MariaDB's answer to a plain connection under require_secure_transport.
        if (config.sslMode === 'disabled' && serverErrno(error) === 1045) failed.message += '; if the server requires TLS, set ssl-mode=required in the URL';
        throw failed;
      }
      options.onRetry?.(retry, Math.round(delay), (error as Error).message);
      await sleep(delay, abort);
    }
  }
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
