import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, sandbox, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';
import { browser, NGINX, nginx, raw, setCookie } from './proxy-helpers.js';
import { serve } from './serve-helpers.js';

const TOKEN = 'a-token-behind-a-proxy-0123456789';
const bearer = { authorization: `Bearer ${TOKEN}` };

function tokenFile(box: { path(name: string): string }): string {
  const file = box.path('token');
  writeFileSync(file, `${TOKEN}\n`, { mode: 0o600 });
  return file;
}

// A client of nginx logs in with the token and asks for a run of `job`: what it was told.
async function loginAndRun(front: { url: string; ca: string }, job: string, headers: Record<string, string> = {}) {
  const client = browser(front.url, { ca: front.ca, from: '127.0.0.2', headers });
  const form = await client.get('/login');
  const login = await client.post('/login', { csrf: await client.csrf('/login'), token: TOKEN, next: `/jobs/${job}` });
  const run = await client.post(`/jobs/${job}/run`, { csrf: await client.csrf(`/jobs/${job}`), args: '' });
  return { form, login, run };
}

// Behind a real nginx with TLS (Debian's package; .ci/run installs it), configured as the
// docs/web-page.md's "Behind a reverse proxy" shows: the login, its cookie, forms and who asked.
const title = NGINX ? 'serve behind nginx with TLS' : 'serve behind nginx with TLS (skipped: nginx is absent; apt-get install -y nginx)';
describe.skipIf(!NGINX)(title, () => {
  for (const kind of STORES) {
    it(`${kind}: docs/web-page.md's setup (token, --trust-proxy): bearer, a Secure login, Run now records the browser's address`, async () => {
      const box = storeBox(kind);
      const job = box.job('proxied');
      await cronguard(['-n', job, '--', 'true'], box.env);
      const server = await serve(['--token-file', tokenFile(box), '--trust-proxy'], box.env);
      const front = await nginx(box, server.url);
      const api = await raw(front.url, { path: '/api/jobs', headers: bearer, ca: front.ca });
      expect(api.status).toBe(200);
      expect(JSON.parse(api.body).map((j: { job: string }) => j.job)).toContain(job);
      const { form, login, run } = await loginAndRun(front, job);
      expect(setCookie(form, 'cronguard_csrf')).toMatch(/; Secure/);
      expect(login.status).toBe(303);
      expect(setCookie(login, 'cronguard_session')).toMatch(/HttpOnly.*; Secure.*SameSite=Lax|SameSite=Lax.*; Secure/);
      expect(run.status).toBe(303);
      expect((await box.requests()).map((r) => r.requested_by)).toEqual(['web (127.0.0.2)']);
      await waitFor(() => / 127\.0\.0\.2 POST \/jobs\/.*\/run 303 /.test(server.stderr()), 'the request log to name the client');
    });

    it(`${kind}: Host rewritten (nginx's default) and nginx's own login: X-Forwarded-Host checks the origin, Run now records the login`, async () => {
      const box = storeBox(kind);
      const job = box.job('logins');
      await cronguard(['-n', job, '--', 'true'], box.env);
      const users = box.path('htpasswd');
      writeFileSync(users, `alice:${execFileSync('openssl', ['passwd', '-apr1', 'pw'], { encoding: 'utf8' }).trim()}\n`);
      const server = await serve(['--token-file', tokenFile(box), '--trust-proxy'], box.env);
      const front = await nginx(box, server.url, (block) =>
        block.replace(/\n\s*proxy_set_header Host \$http_host;/, '').replace('location / {', `location / {\n        auth_basic "cron";\n        auth_basic_user_file ${users};`),
      );
      expect((await raw(front.url, { path: '/login', ca: front.ca })).status).toBe(401);
      const basic = { authorization: `Basic ${Buffer.from('alice:pw').toString('base64')}` };
      const { login, run } = await loginAndRun(front, job, basic);
      expect(login.status).toBe(303);
      expect(setCookie(login, 'cronguard_session')).toMatch(/; Secure/);
      expect(run.status).toBe(303);
      expect((await box.requests()).map((r) => r.requested_by)).toEqual(['web alice (127.0.0.2)']);
    });
  }

  it('without --trust-proxy: with Host passed on the token is enough (no 421) and the Origin makes the cookie Secure; a rewritten Host is refused, naming --trust-proxy', async () => {
    const box = sandbox();
    await cronguard(['-n', 'plain', '--', 'true'], box.env);
    const server = await serve(['--token-file', tokenFile(box)], box.env);
    const front = await nginx(box, server.url);
    expect((await raw(front.url, { path: '/api/jobs', headers: bearer, ca: front.ca })).status).toBe(200);
    const { login, run } = await loginAndRun(front, 'plain');
    expect(setCookie(login, 'cronguard_session')).toMatch(/; Secure/);
    expect(run.status).toBe(303);
    // The headers are not believed: the client is the proxy.
    expect(JSON.parse((await cronguard(['requests', '--json'], box.env)).stdout).map((r: { requested_by: string }) => r.requested_by)).toEqual(['web (127.0.0.1)']);
    const rewritten = await nginx(box, server.url, (block) => block.replace(/\n\s*proxy_set_header Host \$http_host;/, ''));
    const client = browser(rewritten.url, { ca: rewritten.ca });
    const refused = await client.post('/login', { csrf: await client.csrf('/login'), token: TOKEN, next: '/' });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatch(/a POST from https:\/\/127\.0\.0\.1:\d+ is not taken: this server is addressed as http:\/\/127\.0\.0\.1:\d+ \(behind a reverse proxy: pass the Host header on, or give --trust-proxy/);
  });
});

describe('serve: X-Forwarded-* from a client that is not a trusted proxy', () => {
  it('are ignored: no Secure cookie, the connecting address recorded, no login taken from them', async () => {
    const box = sandbox();
    await cronguard(['-n', 'spoof', '--', 'true'], box.env);
    const lies = { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'https', 'x-forwarded-user': 'mallory', 'x-forwarded-host': 'cron.example' };
    // A proxy named by address is the only one trusted; this client is not it.
    const server = await serve(['--trust-proxy', '192.0.2.10'], box.env);
    const client = browser(server.url, { headers: lies });
    const page = await client.get('/jobs/spoof');
    expect(page.status).toBe(200);
    expect(setCookie(page, 'cronguard_csrf')).not.toMatch(/Secure/);
    expect((await client.post('/jobs/spoof/run', { csrf: await client.csrf('/jobs/spoof'), args: '' })).status).toBe(303);
    expect(JSON.parse((await cronguard(['requests', '--json'], box.env)).stdout).map((r: { requested_by: string }) => r.requested_by)).toEqual(['web (127.0.0.1)']);
  });

  it('a trusted proxy on this machine: the right-most untrusted address of X-Forwarded-For is the client', async () => {
    const box = sandbox();
    await cronguard(['-n', 'chain', '--', 'true'], box.env);
    const forwarded = { 'x-forwarded-for': '198.51.100.1, 203.0.113.9, 127.0.0.1', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'cron.example' };
    // Without a token the name the browser used must be this server's: checked as forwarded.
    const unnamed = await serve(['--trust-proxy'], box.env);
    expect((await raw(unnamed.url, { headers: forwarded })).status).toBe(421);
    const server = await serve(['--trust-proxy', '--allowed-hosts', 'cron.example'], box.env);
    const client = browser(server.url, { headers: forwarded, origin: 'https://cron.example' });
    expect(setCookie(await client.get('/jobs/chain'), 'cronguard_csrf')).toMatch(/; Secure/);
    expect((await client.post('/jobs/chain/run', { csrf: await client.csrf('/jobs/chain'), args: '' })).status).toBe(303);
    expect(JSON.parse((await cronguard(['requests', '--json'], box.env)).stdout).map((r: { requested_by: string }) => r.requested_by)).toEqual(['web (203.0.113.9)']);
  });
});
