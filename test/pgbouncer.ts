import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from './free-port.js';

// A real PgBouncer (Debian's package) in front of the test server, for the field tests of
// poolers. It refuses to run as root, so it runs as the postgres user, with its files in a
// directory that user owns, on a free port (never 6432, where Debian's own pgbouncer
// service listens if the package started it).
export const PGBOUNCER = '/usr/sbin/pgbouncer';
export const hasPgbouncer = existsSync(PGBOUNCER);

export interface Pgbouncer {
  // A URL of database `test` through the pooler, as cronguard is given it.
  readonly url: string;
  // Its admin console (database `pgbouncer`: PAUSE, RESUME, SHOW CLIENTS), for adminUser.
  readonly adminUrl: string;
  readonly log: () => string;
  stop(): Promise<void>;
}

export interface PgbouncerOptions {
  readonly poolMode: 'session' | 'transaction';
  // PgBouncer's default: none (an `options` startup parameter is refused).
  readonly ignoreStartupParameters?: string;
  // Small, so that clients really share server connections.
  readonly poolSize?: number;
  // The server it pools: the test server's `test` database unless told.
  readonly target?: string;
  // PgBouncer's default: 100 clients at once.
  readonly maxClientConn?: number;
  // The user of the target allowed the admin console (PgBouncer's admin_users); none by default.
  readonly adminUser?: boolean;
  // More of pgbouncer.ini's [pgbouncer] settings, as name = value.
  readonly settings?: Readonly<Record<string, string | number>>;
}

export async function startPgbouncer(options: PgbouncerOptions): Promise<Pgbouncer> {
  // Imported only when needed: the bench, which runs outside vitest, names its own target.
  const target = new URL(options.target ?? (await import('./pg-helpers.js')).databaseUrl());
  const dir = mkdtempSync('/tmp/cronguard-pgbouncer-');
  chmodSync(dir, 0o755);
  const user = decodeURIComponent(target.username || 'postgres');
  const password = decodeURIComponent(target.password);
  const file = (name: string, text: string) => {
    writeFileSync(join(dir, name), text);
    chownSync(join(dir, name), uidOf('postgres'), gidOf('postgres'));
  };
  file('users.txt', `"${user}" "${password}"\n`);
  chownSync(dir, uidOf('postgres'), gidOf('postgres'));
  const tried: number[] = [];
  // A free port can be taken between the look and the pooler's bind: then another.
  for (let tries = 0; tries < 5; tries++) {
    const port = await freePort();
    tried.push(port);
    file(
      'pgbouncer.ini',
      [
        '[databases]',
        `test = host=${target.hostname} port=${target.port || 5432} dbname=${target.pathname.slice(1) || 'test'} user=${user}${password ? ` password=${password}` : ''}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${dir}/users.txt`,
        `pool_mode = ${options.poolMode}`,
        `default_pool_size = ${options.poolSize ?? 2}`,
        ...(options.maxClientConn ? [`max_client_conn = ${options.maxClientConn}`] : []),
        ...(options.adminUser ? [`admin_users = ${user}`] : []),
        ...Object.entries(options.settings ?? {}).map(([name, value]) => `${name} = ${value}`),
        `logfile = ${dir}/pgbouncer.log`,
        `pidfile = ${dir}/pgbouncer.pid`,
        ...(options.ignoreStartupParameters ? [`ignore_startup_parameters = ${options.ignoreStartupParameters}`] : []),
        '',
      ].join('\n'),
    );
    file('pgbouncer.log', '');
    const child = spawn('runuser', ['-u', 'postgres', '--', PGBOUNCER, join(dir, 'pgbouncer.ini')], { stdio: 'ignore' });
    if (await listening(child, port, join(dir, 'pgbouncer.log'))) {
      const log = () => readFileSync(join(dir, 'pgbouncer.log'), 'utf8');
      return {
        url: `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/test`,
        adminUrl: `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/pgbouncer`,
        log,
        // SIGTERM to the pooler itself (its pidfile): an immediate shutdown, whatever its
        // clients still do; runuser, its parent, then exits with it.
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) {
            const exited = new Promise((resolve) => child.once('exit', resolve));
            try {
              process.kill(Number(readFileSync(join(dir, 'pgbouncer.pid'), 'utf8')), 'SIGTERM');
            } catch {
              child.kill('SIGKILL');
            }
            await exited;
          }
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
  }
  const log = readFileSync(join(dir, 'pgbouncer.log'), 'utf8');
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`pgbouncer did not start on any of ports ${tried.join(', ')}:\n${log}`);
}

// Waits until the pooler says it listens on `port` (a connection alone could reach another
// process on it); false when it exited first (the port was taken).
async function listening(child: ChildProcess, port: number, logFile: string): Promise<boolean> {
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  for (let tries = 0; tries < 400 && !exited; tries++) {
    if (readFileSync(logFile, 'utf8').includes(`listening on 127.0.0.1:${port}`)) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!exited) child.kill('SIGKILL');
  return false;
}

function uidOf(name: string): number {
  return Number(passwd(name)[2]);
}

function gidOf(name: string): number {
  return Number(passwd(name)[3]);
}

function passwd(name: string): string[] {
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${name}:`));
  if (!line) throw new Error(`no user ${name}`);
  return line.split(':');
}
