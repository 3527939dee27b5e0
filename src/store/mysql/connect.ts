import { connectRetrying, type RetryOptions } from '../connect-retry.js';
import type { MysqlConfig } from './config.js';
import { isBusyError, mysqlError, serverErrno } from './errors.js';
import { connectMysql, type MysqlSession } from './session.js';

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
