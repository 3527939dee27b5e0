import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { ROOT, type Sandbox, waitFor } from '../helpers.js';

// One HTTP(S) answer, read whole.
export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

export interface RawRequest {
  readonly method?: string;
  readonly path?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  // The address the client connects from (127.0.0.2: another client of this machine).
  readonly from?: string;
  // The CA to trust for https (the test's self-signed certificate).
  readonly ca?: string;
}

// A request with the headers given and nothing else (fetch would set Host and Origin its
// own way), from the address given.
export function raw(url: string, options: RawRequest = {}): Promise<Answer> {
  const target = new URL(url);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      {
        host: target.hostname,
        port: target.port,
        method: options.method ?? 'GET',
        path: options.path ?? '/',
        headers: options.headers,
        localAddress: options.from,
        ca: options.ca,
        servername: target.protocol === 'https:' ? 'localhost' : undefined,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode as number, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

// The cookie pairs an answer sets (name=value), for the next request's Cookie header.
export function cookiesOf(answer: Answer): string {
  const lines = (answer.headers['set-cookie'] ?? []) as string[];
  return lines.map((line) => line.split(';')[0]).join('; ');
}

export const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((path) => existsSync(path));

// docs/web-page.md's nginx server block (the one under "Behind a reverse proxy"), so that
// the configuration the page shows is the one tested.
export function docsNginx(): string {
  const page = readFileSync(join(ROOT, 'docs/web-page.md'), 'utf8');
  const block = /```nginx\n([\s\S]*?)```/.exec(page)?.[1];
  if (!block) throw new Error('docs/web-page.md has no ```nginx block');
  return block;
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

export interface Nginx {
  readonly url: string;
  // The self-signed certificate it serves (PEM), for the client to trust.
  readonly ca: string;
}

// A real nginx in front of `upstream` (a cronguard serve URL), as docs/web-page.md configures
// it, with TLS under a self-signed certificate made here: its own prefix and configuration
// in the sandbox, one process (no daemon, no master), a free port of 127.0.0.1. `edit`
// changes the page's server block (for a variant).
export async function nginx(box: Sandbox, upstream: string, edit: (block: string) => string = (b) => b): Promise<Nginx> {
  const prefix = mkdtempSync(join(box.dir, 'nginx-'));
  const path = (name: string) => join(prefix, name);
  const cert = path('cert.pem');
  const key = path('key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  const port = await freePort();
  const upstreamPort = new URL(upstream).port;
  const block = edit(docsNginx())
    .replace(/listen 443 ssl;/, `listen 127.0.0.1:${port} ssl;`)
    .replace(/ssl_certificate .*;/, `ssl_certificate ${cert};`)
    .replace(/ssl_certificate_key .*;/, `ssl_certificate_key ${key};`)
    .replace(/proxy_pass http:\/\/127\.0\.0\.1:8470;/, `proxy_pass http://127.0.0.1:${upstreamPort};`);
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `${t}_temp_path ${path(t)};`).join('\n  ');
  const config = path('nginx.conf');
  writeFileSync(config, `daemon off;
master_process off;
pid ${path('nginx.pid')};
error_log stderr warn;
events {}
http {
  access_log off;
  ${temp}
  ${block}
}
`);
  const child = spawn(NGINX as string, ['-e', 'stderr', '-p', prefix, '-c', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  let stderr = '';
  let exited = false;
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.on('exit', () => (exited = true));
  const ca = readFileSync(cert, 'utf8');
  const url = `https://127.0.0.1:${port}`;
  await waitFor(async () => exited || (await raw(url, { path: '/assets/style.css', ca }).then(() => true, () => false)), 'nginx to answer');
  if (exited) throw new Error(`nginx did not start: ${stderr}`);
  return { url, ca };
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// What a browser does that matters here: it keeps cookies, and sends its Origin with a
// form's POST (`origin`, if the page was not loaded from `base`). `from` is the address it
// connects from; `headers` go with every request.
export interface Browser {
  get(path: string): Promise<Answer>;
  post(path: string, form: Record<string, string>): Promise<Answer>;
  // The CSRF field of the forms on a page.
  csrf(path: string): Promise<string>;
}

export function browser(base: string, options: { ca?: string; from?: string; headers?: Record<string, string>; origin?: string } = {}): Browser {
  const jar = new Map<string, string>();
  const send = async (method: string, path: string, form?: Record<string, string>) => {
    const headers: Record<string, string> = { ...options.headers };
    if (jar.size > 0) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    if (form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      headers.origin = options.origin ?? new URL(base).origin;
    }
    const answer = await raw(base, { method, path, headers, body: form && new URLSearchParams(form).toString(), from: options.from, ca: options.ca });
    for (const line of (answer.headers['set-cookie'] ?? []) as string[]) {
      const pair = line.split(';')[0] as string;
      jar.set(pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1));
    }
    return answer;
  };
  return {
    get: (path) => send('GET', path),
    post: (path, form) => send('POST', path, form),
    csrf: async (path) => {
      const token = /name="csrf" value="([0-9a-f]+)"/.exec((await send('GET', path)).body)?.[1];
      if (!token) throw new Error(`no form on ${path}`);
      return token;
    },
  };
}

// The Set-Cookie line of one cookie in an answer.
export function setCookie(answer: Answer, name: string): string | undefined {
  return ((answer.headers['set-cookie'] ?? []) as string[]).find((line) => line.startsWith(`${name}=`));
}
