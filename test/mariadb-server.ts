import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { freePort } from './free-port.js';
import { waitFor } from './helpers.js';

// A MariaDB server of the test's own (Debian's mariadbd on a data directory made for it), for
// what the shared server must not suffer: a crash, a restart. Field tests only.
export interface PrivateMariadb {
  readonly url: string;
  // The free port it was given (it keeps it across a restart).
  readonly port: number;
  // Its own directory (the data directory is data/ in it), the mysql user's.
  readonly dir: string;
  // Kills the server at once (SIGKILL, as a crash or an OOM kill), or shuts it down cleanly.
  crash(): Promise<void>;
  shutdown(): Promise<void>;
  start(): Promise<void>;
}

const servers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of servers.splice(0)) await stop();
});

export const haveMariadbd = (() => {
  try {
    execFileSync('/usr/sbin/mariadbd', ['--version'], { stdio: 'ignore' });
    execFileSync('id', ['mysql'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

// `extra`: more of mariadbd's options (TLS files, require_secure_transport); a file they name
// must be readable by the mysql user.
export async function privateMariadb(extra: readonly string[] = []): Promise<PrivateMariadb> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'cronguard-mariadb-'));
  chownSync(dir, Number(execFileSync('id', ['-u', 'mysql']).toString()), Number(execFileSync('id', ['-g', 'mysql']).toString()));
  // Once more if it fails (seen once on a machine at load 14, reason unknown): its error then says why.
  const install = () =>
    execFileSync('mariadb-install-db', [`--datadir=${dir}/data`, '--user=mysql', '--auth-root-authentication-method=normal', '--skip-test-db'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  try {
    install();
  } catch {
    rmSync(join(dir, 'data'), { recursive: true, force: true });
    install();
  }
  let server: ChildProcess | null = null;
  const ping = () => {
    try {
      execFileSync('mysqladmin', ['-uroot', '-h127.0.0.1', `-P${port}`, '--connect-timeout=2', 'ping'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
  const stopped = async (signal: NodeJS.Signals) => {
    const child = server;
    server = null;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  };
  const handle: PrivateMariadb = {
    url: `mysql://root@127.0.0.1:${port}/mysql`,
    port,
    dir,
    start: async () => {
      server = spawn('/usr/sbin/mariadbd', ['--no-defaults', `--datadir=${dir}/data`, `--port=${port}`, '--bind-address=127.0.0.1',
        `--socket=${dir}/sock`, '--user=mysql', '--skip-log-bin', '--innodb-buffer-pool-size=16M', ...extra], { stdio: 'ignore' });
      await waitFor(ping, `the private MariaDB on port ${port} to answer`);
    },
    crash: () => stopped('SIGKILL'),
    shutdown: () => stopped('SIGTERM'),
  };
  servers.push(async () => {
    await stopped('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  await handle.start();
  return handle;
}
