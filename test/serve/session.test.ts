import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cronguard, sandbox, waitFor } from '../helpers.js';
import { cookiesOf, raw } from './proxy-helpers.js';
import { serve } from './serve-helpers.js';

const OLD = 'the-first-token-0123456789';
const NEW = 'the-second-token-0123456789';
const PASSPHRASE = 'correct horse battery staple';
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

// The token's life: rotation without a restart, HUP, a passphrase, logout, wrong tries;
// and which Host names a server without a token answers.
describe('serve: sessions and the token file', () => {
  it('a rotated token file takes effect without a restart: the old token and its sessions end; HUP re-reads, never stops', async () => {
    const box = sandbox();
    const file = box.path('token');
    writeFileSync(file, `${OLD}\n`, { mode: 0o600 });
    const server = await serve(['--token-file', file], box.env);
    const csrf = await server.csrf('/login');
    expect((await server.post('/login', { csrf, token: OLD, next: '/' })).status).toBe(303);
    expect((await server.get('/')).status).toBe(200);
    // Renamed over, as a careful rotation does: within a second, no signal needed.
    writeFileSync(box.path('token.new'), `${NEW}\n`, { mode: 0o600 });
    renameSync(box.path('token.new'), file);
    await waitFor(async () => (await server.get('/api/jobs', { headers: bearer(NEW) })).status === 200, 'the new token to be taken');
    await waitFor(() => /it changed, a new token is in force; sessions of the old one have ended/.test(server.stderr()), 'the change to be told');
    expect((await server.get('/api/jobs', { headers: bearer(OLD) })).status).toBe(401);
    expect((await server.get('/')).status).toBe(303);
    // HUP: read again, and the server goes on.
    server.started.child.kill('SIGHUP');
    await waitFor(() => /read again on SIGHUP, the token is unchanged/.test(server.stderr()), 'the HUP to be answered');
    expect((await server.get('/api/jobs', { headers: bearer(NEW) })).status).toBe(200);
    // A file that holds no token any more refuses every token (it may have been revoked).
    rmSync(file);
    await waitFor(async () => (await server.get('/api/jobs', { headers: bearer(NEW) })).status === 401, 'the removed token to be refused');
    await waitFor(() => /every token and session is refused until it holds one/.test(server.stderr()), 'the refusal to be told');
    expect(await server.stop()).toBe(0);
  });

  it('HUP without a token file says there is nothing to read and keeps serving', async () => {
    const server = await serve([], sandbox().env);
    server.started.child.kill('SIGHUP');
    await waitFor(() => /SIGHUP: nothing to read again \(no --token-file\)/.test(server.stderr()), 'the HUP to be answered');
    expect((await server.get('/')).status).toBe(200);
  });

  it('a passphrase with spaces works as a bearer token and in the login form; log out ends the session', async () => {
    const box = sandbox();
    const file = box.path('token');
    writeFileSync(file, `${PASSPHRASE}\n`, { mode: 0o600 });
    const server = await serve(['--token-file', file], box.env);
    expect((await server.get('/api/jobs', { headers: bearer(PASSPHRASE) })).status).toBe(200);
    expect((await server.get('/api/jobs', { headers: bearer('correct horse') })).status).toBe(401);
    const login = await server.post('/login', { csrf: await server.csrf('/login'), token: PASSPHRASE, next: '/' });
    expect(login.status).toBe(303);
    expect(login.headers.get('set-cookie')).toMatch(/SameSite=Lax/i);
    const page = await (await server.get('/')).text();
    expect(page).toContain('<a href="/logout">log out</a>');
    const out = await server.post('/logout', { csrf: await server.csrf('/logout') });
    expect(out.status).toBe(303);
    expect(out.headers.get('location')).toBe('/login');
    expect((await server.get('/')).status).toBe(303);
  });

  it('after five wrong tokens a client must wait (429), the right token too; other clients go on; the wait ends', async () => {
    const box = sandbox();
    const file = box.path('token');
    writeFileSync(file, `${OLD}\n`, { mode: 0o600 });
    const server = await serve(['--token-file', file], box.env);
    const api = (token: string, from?: string) => raw(server.url, { path: '/api/jobs', headers: bearer(token), from });
    for (let i = 0; i < 3; i++) expect((await api(`wrong-${i}`)).status).toBe(401);
    // The login form counts against the same client.
    const form = await raw(server.url, { path: '/login' });
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(form.body)?.[1] as string;
    const tryLogin = (token: string) =>
      raw(server.url, { method: 'POST', path: '/login', body: new URLSearchParams({ csrf, token, next: '/' }).toString(),
        headers: { cookie: cookiesOf(form), 'content-type': 'application/x-www-form-urlencoded' } });
    expect((await tryLogin('wrong-3')).status).toBe(403);
    expect((await tryLogin('wrong-4')).status).toBe(403);
    expect((await api('wrong-5')).status).toBe(401);
    // Six wrong: the next try waits 4 s, looked at or not (generous for a busy machine).
    const held = await api(OLD);
    expect(held.status).toBe(429);
    expect(Number(held.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(held.body).error).toMatch(/Too many wrong tokens from your address: try again in \d+ s/);
    const page = await tryLogin(OLD);
    expect(page.status).toBe(429);
    expect(page.body).toContain('Too many wrong tokens');
    expect((await api(OLD, '127.0.0.2')).status).toBe(200);
    await waitFor(async () => (await api(OLD)).status === 200, 'the wait to end');
    expect((await api('wrong-again')).status).toBe(401);
  });
  // One IPv6 client has a whole /64 to itself (a home line, a rented server): were each of
  // its addresses a client of its own, it would get five free tries per address, without end.
  it('behind a trusted proxy, the addresses of one IPv6 /64 are one client; other networks and IPv4 go on', async () => {
    const box = sandbox();
    const file = box.path('token');
    writeFileSync(file, `${OLD}\n`, { mode: 0o600 });
    const server = await serve(['--token-file', file, '--trust-proxy'], box.env);
    const api = (token: string, client: string) => raw(server.url, { path: '/api/jobs', headers: { ...bearer(token), 'x-forwarded-for': client } });
    for (let i = 1; i <= 6; i++) expect((await api(`wrong-${i}`, `2001:db8:0:1::${i.toString(16)}`)).status).toBe(401);
    expect((await api(OLD, '2001:DB8:0:1:ffff:ffff:ffff:7')).status).toBe(429);
    expect((await api(OLD, '2001:db8:0:2::1')).status).toBe(200);
    expect((await api(OLD, '192.0.2.7')).status).toBe(200);
  });
});

describe('serve: which Host names are answered', () => {
  const status = async (url: string, host: string, headers: Record<string, string> = {}) => (await raw(url, { path: '/api/jobs', headers: { host, ...headers } })).status;

  it("on loopback, the machine's own name too; with a token, any name (the token is what counts)", async () => {
    const plain = await serve([], sandbox().env);
    const { port } = new URL(plain.url);
    expect(await status(plain.url, `${hostname()}:${port}`)).toBe(200);
    expect(await status(plain.url, `evil.example:${port}`)).toBe(421);
    const box = sandbox();
    writeFileSync(box.path('token'), OLD, { mode: 0o600 });
    const guarded = await serve(['--token-file', box.path('token')], box.env);
    expect(await status(guarded.url, 'cron.example', bearer(OLD))).toBe(200);
    expect(await status(guarded.url, 'cron.example')).toBe(401);
  });

  it('--read-only on an open address answers only its own names and --allowed-hosts (DNS rebinding)', async () => {
    const box = sandbox();
    const open = await serve(['--read-only', '--listen', '0.0.0.0:0'], box.env);
    const url = open.url.replace('0.0.0.0', '127.0.0.1');
    const { port } = new URL(url);
    expect(await status(url, `evil.example:${port}`)).toBe(421);
    expect((await raw(url, { headers: { host: 'evil.example' } })).body).toMatch(/answers only to its own names and --allowed-hosts, not to 'evil.example'/);
    expect(await status(url, `${hostname()}:${port}`)).toBe(200);
    expect(await status(url, `192.0.2.1:${port}`)).toBe(200);
    const named = await serve(['--read-only', '--listen', '0.0.0.0:0', '--allowed-hosts', 'Cron.Example,cron'], box.env);
    const namedUrl = named.url.replace('0.0.0.0', '127.0.0.1');
    expect(await status(namedUrl, 'cron.example')).toBe(200);
    expect(await status(namedUrl, 'cron:443')).toBe(200);
    expect(await status(namedUrl, 'cron.example.evil')).toBe(421);
  });

  // A rebinding page is same-origin with the server, so its fetch may add any header
  // without a preflight: X-Forwarded-Host naming this server must not vouch for a Host
  // naming the attacker's site, though the browser (on this machine) is a trusted proxy.
  it('--trust-proxy: a request whose own Host is a foreign name is refused whatever X-Forwarded-Host says', async () => {
    const box = sandbox();
    for (const args of [['--trust-proxy'], ['--trust-proxy', '--read-only', '--listen', '0.0.0.0:0']]) {
      const server = await serve(args, box.env);
      const url = server.url.replace('0.0.0.0', '127.0.0.1');
      const { port } = new URL(url);
      expect(await status(url, `evil.example:${port}`, { 'x-forwarded-host': `localhost:${port}` }), args.join(' ')).toBe(421);
      expect(await status(url, `evil.example:${port}`, { 'x-forwarded-host': hostname() }), args.join(' ')).toBe(421);
      // A proxy that rewrites Host (to the address it connects to) or passes the browser's on.
      expect(await status(url, `127.0.0.1:${port}`, { 'x-forwarded-host': `localhost:${port}` }), args.join(' ')).toBe(200);
      expect(await status(url, `127.0.0.1:${port}`, { 'x-forwarded-host': 'evil.example' }), args.join(' ')).toBe(421);
      expect(await status(url, 'localhost', { 'x-forwarded-host': 'localhost' }), args.join(' ')).toBe(200);
    }
  });

  // The socket names a client in one canonical form; the operator may write another.
  it('--trust-proxy takes an IPv6 address however it is written (zeros written out)', async () => {
    const box = sandbox();
    for (const written of ['0:0:0:0:0:0:0:1', '0000::0001']) {
      const server = await serve(['--listen', '[::1]:0', '--trust-proxy', written], box.env);
      expect((await server.get('/api/jobs', { headers: { 'x-forwarded-for': '192.0.2.9' } })).status).toBe(200);
      await waitFor(() => / 192\.0\.2\.9 GET \/api\/jobs 200 /.test(server.stderr()), `${written}: the forwarded client to be logged`, 10_000);
    }
  });

  it('bad --allowed-hosts and --trust-proxy values are usage errors (64), one line', async () => {
    const box = sandbox();
    for (const [args, message] of [
      [['--allowed-hosts', 'a b'], /--allowed-hosts: 'a b' is not a host name/],
      [['--trust-proxy=10.0.0.300'], /--trust-proxy: '10.0.0.300' is not an IP address \(or 'loopback'\)/],
    ] as const) {
      const result = await cronguard(['serve', ...args], box.env);
      expect(result.code).toBe(64);
      expect(result.stderr).toMatch(message);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
    }
  });
});
