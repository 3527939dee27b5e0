import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { type AddressInfo, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cronguard, runs, sandbox } from '../helpers.js';

// sslmode=verify-full checks the server's certificate against the host connected to, an IP
// address included. mysql2 did not for an IP (its TLS had no server name, and Node then
// checked against 'localhost'), which cronguard's bundle patches; this is the same question
// asked of pg: a certificate for 'localhost' only must be refused at 127.0.0.1.
const certs = mkdtempSync(join(tmpdir(), 'cronguard-pg-tls-'));
const cert = join(certs, 'cert.pem');
const key = join(certs, 'key.pem');
let server: Server;
let port = 0;
// Startup messages the server received over TLS: the client accepted its certificate.
let startups = 0;

beforeAll(async () => {
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost', '-keyout', key, '-out', cert,
  ], { stdio: 'ignore' });
  // Just enough of a PostgreSQL server: it answers the SSLRequest with 'S', completes the
  // TLS handshake, counts the startup message that follows, and hangs up.
  server = createServer((socket) => {
    socket.once('data', () => {
      socket.write('S');
      const tls = new TLSSocket(socket, { isServer: true, key: readFileSync(key), cert: readFileSync(cert) });
      tls.on('data', () => {
        startups++;
        tls.destroy();
      });
      tls.on('error', () => {});
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => {
  server?.close();
  rmSync(certs, { recursive: true, force: true });
});

const url = (host: string) => `postgres://u@${host}:${port}/d?sslmode=verify-full&sslrootcert=${cert}&connect_timeout=5`;

describe('sslmode=verify-full against an IP address', () => {
  it('refuses a certificate that does not name that address: 69, one line, nothing run or recorded', async () => {
    const box = sandbox();
    const marker = box.path('ran');
    const before = startups;
    const result = await cronguard(['-n', 'tls', '--db', url('127.0.0.1'), '--', 'touch', marker], box.env);
    expect(result.code).toBe(69);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^cronguard: PostgreSQL at u@127\.0\.0\.1:\d+\/d: Hostname\/IP does not match certificate's altnames: IP: 127\.0\.0\.1 is not in the cert's list/);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(startups).toBe(before);
    expect(existsSync(marker)).toBe(false);
    expect(runs(box.stateDir)).toEqual([]);
  });

  it('accepts the same certificate at the name it carries (the handshake completes)', async () => {
    const box = sandbox();
    const before = startups;
    const result = await cronguard(['-n', 'tls', '--db', url('localhost'), '--', 'true'], box.env);
    // The stand-in hangs up after the handshake: no session, so 69, but it got the startup.
    expect(result.code).toBe(69);
    expect(result.stderr).not.toMatch(/altnames/);
    expect(startups).toBeGreaterThan(before);
  });
});
