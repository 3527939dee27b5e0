import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { freePort } from './free-port.js';
import { waitFor } from './helpers.js';

// A Redis server of the test file's own (Debian's redis-server on a free port, nothing kept
// on disk, DEBUG allowed), for -l redis: restarted, frozen, flushed as a test needs.
export const REDIS_SERVER = '/usr/bin/redis-server';
export const haveRedis = existsSync(REDIS_SERVER);

export interface PrivateRedis {
  readonly port: number;
  // redis://127.0.0.1:PORT (with `user:password@` given as `auth`).
  url(auth?: string): string;
  readonly dir: string;
  // The TLS port and the CA file of its certificate, when started with tls.
  readonly tls: { readonly port: number; readonly ca: string } | null;
  // redis-cli against it (as the default user), its reply trimmed.
  cli(...args: string[]): string;
  // A command sent without waiting for its reply (DEBUG SLEEP).
  send(...args: string[]): ChildProcess;
  stop(): Promise<void>;
  start(): Promise<void>;
}

const servers: PrivateRedis[] = [];
afterAll(async () => {
  for (const server of servers.splice(0)) {
    await server.stop();
    rmSync(server.dir, { recursive: true, force: true });
  }
});

export async function privateRedis(options: { tls?: boolean } = {}): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'cronguard-redis-'));
  let tls: PrivateRedis['tls'] = null;
  const extra: string[] = [];
  if (options.tls) {
    const ca = join(dir, 'ca.pem');
    const key = join(dir, 'server.key');
    const cert = join(dir, 'server.pem');
    // A self-signed certificate for 127.0.0.1 and localhost: its own CA.
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', key, '-out', cert], { stdio: 'ignore' });
    writeFileSync(ca, execFileSync('cat', [cert]));
    tls = { port: await freePort(), ca };
    extra.push('--tls-port', String(tls.port), '--tls-cert-file', cert, '--tls-key-file', key, '--tls-ca-cert-file', ca, '--tls-auth-clients', 'no');
  }
  let child: ChildProcess | null = null;
  const cli = (...args: string[]) => execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  const ping = () => {
    try {
      return cli('PING') === 'PONG';
    } catch {
      return false;
    }
  };
  const server: PrivateRedis = {
    port,
    dir,
    tls,
    url: (auth) => `redis://${auth ? `${auth}@` : ''}127.0.0.1:${port}`,
    cli,
    send: (...args) => spawn('redis-cli', ['-p', String(port), ...args], { stdio: 'ignore' }),
    async start() {
      child = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--enable-debug-command', 'yes', ...extra], {
        stdio: 'ignore',
      });
      await waitFor(ping, `redis-server on port ${port}`, 20_000);
    },
    async stop() {
      const running = child;
      child = null;
      if (!running || running.exitCode !== null) return;
      const gone = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGKILL');
      await gone;
    },
  };
  await server.start();
  servers.push(server);
  return server;
}
