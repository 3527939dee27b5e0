import { chmodSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';
import { serve } from './serve-helpers.js';

const TOKEN = 'a-token-of-enough-length-0123456789';

// How serve starts, refuses to start, and stops; the token and its login.
describe('serve: listening and the token', () => {
  it('bad --listen values, a port in use and an open address without a token: one line each', async () => {
    const box = sandbox();
    const taken = createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => taken.once('listening', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const cases: [string[], number, RegExp][] = [
        [['--listen', 'localhost'], 64, /--listen: 'localhost' is not ADDRESS:PORT/],
        [['--listen', '127.0.0.1:99999'], 64, /is not ADDRESS:PORT/],
        [['--listen', '[nope]:80'], 64, /is not ADDRESS:PORT|not an IPv6 address/],
        [['--listen', `127.0.0.1:${port}`], 69, new RegExp(`--listen 127.0.0.1:${port}: the address is already in use`)],
        [['--listen', '0.0.0.0:0'], 64, /reachable from other machines: give --token-file FILE, or --read-only/],
        [['--token-file', box.path('missing')], 64, /--token-file: cannot read .* does not exist/],
      ];
      for (const [args, code, message] of cases) {
        const result = await cronguard(['serve', ...args], box.env);
        expect({ args, code: result.code }).toEqual({ args, code });
        expect(result.stderr).toMatch(message);
        expect(result.stderr.trim().split('\n')).toHaveLength(1);
      }
    } finally {
      taken.close();
    }
  });

  it('on loopback, answers only requests addressed to this machine (no DNS rebinding)', async () => {
    const server = await serve([], sandbox().env);
    const { port } = new URL(server.url);
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        request({ host: '127.0.0.1', port, path: '/', headers: { host } }, (response) => {
          response.resume();
          resolve(response.statusCode as number);
        }).on('error', reject).end();
      });
    expect(await status('evil.example')).toBe(421);
    expect(await status(`evil.example:${port}`)).toBe(421);
    expect(await status(`localhost:${port}`)).toBe(200);
    expect(await status(`127.0.0.1:${port}`)).toBe(200);
    expect(await status(`[::1]:${port}`)).toBe(200);
    // A form that cannot be parsed is the sender's mistake: 400, not an internal error.
    for (const type of ['multipart/form-data; boundary=zz', 'multipart/form-data']) {
      const broken = await server.get('/login', { method: 'POST', body: '--zz\r\ngarbage', headers: { 'content-type': type } });
      expect(broken.status, type).toBe(400);
      expect(await broken.text()).toContain('The form could not be read.');
    }
    expect(server.stderr()).not.toMatch(/internal error/);
    const big = await server.get('/login', { method: 'POST', body: 'x'.repeat(2 * 1024 * 1024), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(big.status).toBe(413);
  });

  it('stops cleanly on TERM and on INT', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const server = await serve([], sandbox().env);
      expect((await server.get('/')).status).toBe(200);
      server.started.child.kill(signal);
      expect(await server.started.done).toMatchObject({ code: 0 });
    }
  });

  it('with --token-file: the API wants the bearer token, the pages a login; a readable token file warns', async () => {
    const box = sandbox();
    const file = box.path('token');
    writeFileSync(file, `${TOKEN}\n`);
    chmodSync(file, 0o644);
    const server = await serve(['--token-file', file], box.env);
    expect(server.stderr()).toMatch(/token is readable by group or others; chmod 600 it/);
    const refused = await server.get('/api/jobs');
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="cronguard"');
    expect((await server.get('/api/jobs', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await server.get('/api/jobs', { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    expect((await server.get('/metrics', { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    const page = await server.get('/jobs/x?a=1');
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/login?next=%2Fjobs%2Fx%3Fa%3D1');
    const csrf = await server.csrf('/login');
    expect((await server.post('/login', { csrf, token: 'wrong', next: '/' })).status).toBe(403);
    expect((await server.get('/')).status).toBe(303);
    const login = await server.post('/login', { csrf, token: TOKEN, next: '//evil.example/' });
    expect(login.status).toBe(303);
    expect(login.headers.get('location')).toBe('/');
    // A browser drops tabs and line breaks from a URL: `/<tab>/evil.example` is `//evil.example`.
    for (const next of ['/\t/evil.example/', '/\n/evil.example', '/\\evil.example', '\\/evil.example', 'https://evil.example/', '/\r\nX-Injected: 1']) {
      const again = await server.post('/login', { csrf, token: TOKEN, next });
      expect(again.status, JSON.stringify(next)).toBe(303);
      const location = again.headers.get('location') as string;
      expect(new URL(location, server.url).origin, JSON.stringify(next)).toBe(new URL(server.url).origin);
      expect(again.headers.get('x-injected')).toBeNull();
    }
    expect((await server.post('/login', { csrf, token: TOKEN, next: '/jobs/x?a=1#runs' })).headers.get('location')).toBe('/jobs/x?a=1#runs');
    expect(login.headers.get('set-cookie')).toMatch(/HttpOnly/i);
    expect(login.headers.get('set-cookie')).not.toContain(TOKEN);
    expect((await server.get('/')).status).toBe(200);
    // The cookie reads the API; writing through it would be a CSRF hole, so POST wants the bearer.
    expect((await server.get('/api/jobs')).status).toBe(200);
    const body = JSON.stringify({ args: [] });
    expect((await server.get('/api/jobs/x/requests', { method: 'POST', body, headers: { 'content-type': 'application/json' } })).status).toBe(401);
    const posted = await server.get('/api/jobs/x/requests', { method: 'POST', body, headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` } });
    expect(posted.status).toBe(201);
  });

  it('a private token file gives no warning; an open address is allowed with a token', async () => {
    const box = sandbox();
    const file = box.path('token');
    writeFileSync(file, TOKEN, { mode: 0o600 });
    const result = await cronguard(['serve', '--listen', '0.0.0.0:0', '--token-file', file, '--help'], box.env);
    expect(result.code).toBe(0);
    const server = await serve(['--token-file', file], box.env);
    expect(server.stderr()).not.toMatch(/readable/);
  });
});
