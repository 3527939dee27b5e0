import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, createServer as createTlsServer } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientConfig } from '../../src/store/postgres/client-config.js';
import { resolveDb } from '../../src/store/postgres/config.js';
import { DEFERRED_EXTRA_CA, restoreExtraCaCerts } from '../../src/util/extra-ca.js';
import { ROOT, runFile, runs, sandbox } from '../helpers.js';

// NODE_EXTRA_CA_CERTS, which Node would parse at every start, is deferred by the launcher
// (src/util/extra-ca.ts): the command must still get it, and cronguard's own TLS connections
// must still trust what it names.
const certs = mkdtempSync(join(tmpdir(), 'cronguard-tls-'));
const cert = join(certs, 'cert.pem');
const key = join(certs, 'key.pem');
const launcher = `${ROOT}/bin/cronguard`;

beforeAll(() => {
  // A self-signed server certificate, trusted only through NODE_EXTRA_CA_CERTS.
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert,
  ], { stdio: 'ignore' });
});

const closers: (() => void)[] = [];
afterAll(() => {
  for (const close of closers) close();
  rmSync(certs, { recursive: true, force: true });
});

const viaLauncher = (args: readonly string[], env: NodeJS.ProcessEnv) => runFile(launcher, args, env);

describe('NODE_EXTRA_CA_CERTS deferred by the launcher', () => {
  it('reaches the command as it was given, while the wrapper was started without it', async () => {
    const box = sandbox();
    // $PPID is cronguard itself: its environ is what Node was started with.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's ${VAR-default}, not a template
    const script = 'printf "%s|%s\\n" "$NODE_EXTRA_CA_CERTS" "${CRONGUARD_DEFERRED_EXTRA_CA_CERTS-unset}"; tr "\\0" "\\n" < /proc/$PPID/environ | grep -E "^(NODE_EXTRA|CRONGUARD_DEFERRED_EXTRA)_CA_CERTS=" | sort';
    const given = await viaLauncher(['-n', 'ca', '--', 'sh', '-c', script], { ...box.env, NODE_EXTRA_CA_CERTS: cert });
    expect(given).toMatchObject({ code: 0, stderr: '' });
    expect(given.stdout).toBe(`${cert}|unset\n${DEFERRED_EXTRA_CA}=${cert}\n`);
    const { NODE_EXTRA_CA_CERTS: _, ...without } = box.env;
    const none = await viaLauncher(['-n', 'ca', '--', 'sh', '-c', script], without);
    expect(none).toMatchObject({ code: 0, stdout: '|unset\n', stderr: '' });
    // Node itself would print a warning about a missing file at every start, into cron mail.
    const missing = box.path('missing.pem');
    const quiet = await viaLauncher(['-n', 'ca', '--', 'sh', '-c', 'echo "$NODE_EXTRA_CA_CERTS"'], { ...without, NODE_EXTRA_CA_CERTS: missing });
    expect(quiet).toMatchObject({ code: 0, stdout: `${missing}\n`, stderr: '' });
  });

  it('an https ping trusts the certificates it names, and nothing else', async () => {
    const box = sandbox();
    const received: string[] = [];
    const server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
      received.push(`${req.method} ${req.url}`);
      req.resume();
      res.end('OK');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => server.close());
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/check`;
    const { NODE_EXTRA_CA_CERTS: _, ...without } = box.env;

    const trusted = await viaLauncher(['-n', 'tls', '--ping-url', url, '--', 'true'], { ...without, NODE_EXTRA_CA_CERTS: cert });
    expect(trusted).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(received.map((line) => line.replace(/\?.*/, ''))).toEqual(['POST /check/start', 'POST /check']);
    expect(runs(box.stateDir)[0]?.status).toBe('succeeded');
    received.length = 0;

    const untrusted = await viaLauncher(['-n', 'tls', '--ping-url', url, '--', 'true'], without);
    expect(untrusted.code).toBe(0);
    expect(untrusted.stderr).toMatch(/^cronguard: tls: ping to .* failed \(.*self-signed certificate.*\); the run's outcome is unaffected\n$/);
    expect(received).toEqual([]);

    // A FIFO in the file's place (which would block a read, and the whole wrapper with it,
    // while the command runs) is skipped like a file that cannot be read.
    const fifo = box.path('fifo.pem');
    execFileSync('mkfifo', [fifo]);
    const blocked = await viaLauncher(['-v', '-n', 'tls', '--ping-url', url, '--', 'true'], { ...without, NODE_EXTRA_CA_CERTS: fifo });
    expect(blocked.code).toBe(0);
    expect(blocked.stderr).toContain(`ignoring extra certs: NODE_EXTRA_CA_CERTS: ${fifo} is not a regular file`);
    expect(blocked.stderr).toMatch(/ping to .* failed \(.*self-signed certificate/);
    expect(runs(box.stateDir).map((run) => run.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  });
});

describe('a verified PostgreSQL connection with deferred extra certificates', () => {
  it('checks the server against the default roots plus those certificates', async () => {
    const server = createTlsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (socket) => socket.end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => server.close());
    const port = (server.address() as AddressInfo).port;
    const handshake = (mode: string) => {
      const db = resolveDb({ value: `postgres://u@127.0.0.1:${port}/d?sslmode=${mode}`, from: '--db' }, undefined, {});
      const ssl = clientConfig(db?.connection as NonNullable<typeof db>['connection'], true).ssl as object;
      return new Promise<string>((resolve) => {
        const socket = connect({ host: '127.0.0.1', port, ...ssl }, () => resolve('verified'));
        socket.on('error', (error) => resolve(error.message));
        socket.on('secureConnect', () => socket.destroy());
      });
    };
    // Before cronguard restores the variable, the certificate is unknown.
    expect(await handshake('verify-full')).toMatch(/self-signed certificate/);
    const copy = join(certs, 'copy.pem');
    copyFileSync(cert, copy);
    const env: NodeJS.ProcessEnv = { [DEFERRED_EXTRA_CA]: copy };
    restoreExtraCaCerts(env);
    expect(env).toEqual({ NODE_EXTRA_CA_CERTS: copy });
    expect(await handshake('verify-full')).toBe('verified');
    // Read once per process, as Node reads it at start: later connections do not read again.
    rmSync(copy);
    expect(await handshake('verify-ca')).toBe('verified');
  });
});
