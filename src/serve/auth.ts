import { createHmac } from 'node:crypto';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { badRequest } from './context.js';
import { type Csrf, equal, sameOrigin } from './csrf.js';
import { loginPage } from './views/layout.js';

const COOKIE = 'cronguard_session';

// --token-file: the API takes the token as a bearer token; the pages take a cookie the
// login form sets. The cookie holds an HMAC of the token, not the token: it stays valid
// across restarts, dies when the token changes, and never shows the token itself.
export class TokenAuth {
  private readonly session: string;

  constructor(private readonly token: string) {
    this.session = createHmac('sha256', token).update('cronguard session').digest('hex');
  }

  bearer(c: Context): boolean {
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    return match !== null && equal(match[1] as string, this.token);
  }

  cookie(c: Context): boolean {
    const value = getCookie(c, COOKIE);
    return value !== undefined && equal(value, this.session);
  }

  matches(token: string): boolean {
    return equal(token, this.token);
  }

  login(c: Context): void {
    setCookie(c, COOKIE, this.session, { httpOnly: true, sameSite: 'Strict', path: '/', secure: c.req.url.startsWith('https:') });
  }
}

const OPEN = /^\/(login|assets\/.*)$/;

// Who may do what. Without a token, anyone who reaches the server (loopback, or a
// read-only server) may read; a page POST needs the CSRF field, an API POST a JSON body
// from this origin (a cross-site page cannot send one without a CORS preflight we never
// answer). With a token: the API wants it as a bearer token (or, for reading, the login
// cookie), the pages the cookie.
export function guard(auth: TokenAuth | null, csrf: Csrf, readOnly: boolean): MiddlewareHandler {
  return async (c, next) => {
    const path = c.req.path;
    const api = path.startsWith('/api/') || path === '/metrics';
    const post = c.req.method === 'POST';
    if (auth && !OPEN.test(path)) {
      const bearer = auth.bearer(c);
      const cookie = auth.cookie(c);
      if (api && !(bearer || (cookie && !post))) {
        return c.json({ error: 'a bearer token is needed (Authorization: Bearer ...)' }, 401, { 'www-authenticate': 'Bearer realm="cronguard"' });
      }
      if (!api && !cookie) {
        if (post || path.startsWith('/events')) return c.text('log in first', 403);
        return c.redirect(`/login?next=${encodeURIComponent(path + new URL(c.req.url).search)}`, 303);
      }
    }
    if (!post) return next();
    if (readOnly && path !== '/login') return api ? c.json({ error: 'this server is read-only' }, 403) : c.text('this server is read-only', 403);
    if (api) {
      const bearer = auth?.bearer(c) === true;
      const json = /^application\/json\b/i.test(c.req.header('content-type') ?? '');
      if (!bearer && !(json && sameOrigin(c))) return c.json({ error: 'send JSON (Content-Type: application/json) from this origin, or a bearer token' }, 403);
      return next();
    }
    // Every form is read here first (the routes get it from Hono's cache): one that cannot
    // be parsed (a broken multipart body) is the sender's mistake, not ours.
    const form = await c.req.parseBody().catch(() => null);
    if (form === null) return badRequest(c, 'The form could not be read.');
    if (!csrf.valid(c, form.csrf)) return c.text('this form has expired or did not come from this server: reload the page and try again', 403);
    return next();
  };
}

// GET /login: the form; POST /login: a right token sets the cookie and goes on to `next`.
export function loginRoutes(app: Hono, auth: TokenAuth | null, csrf: Csrf): void {
  app.get('/login', (c) => c.html(loginPage(csrf.token(c), safeNext(c.req.query('next')), auth === null, false)));
  app.post('/login', async (c) => {
    const form = await c.req.parseBody();
    const next = safeNext(typeof form.next === 'string' ? form.next : undefined);
    if (!auth) return c.redirect(next, 303);
    if (typeof form.token !== 'string' || !auth.matches(form.token.trim())) {
      return c.html(loginPage(csrf.token(c), next, false, true), 403);
    }
    auth.login(c);
    return c.redirect(next, 303);
  });
}

// Only a path of this server: `//host`, `https://...` or `/<tab>/host` (a browser drops the
// tab and reads `//host`) would make the login an open redirect. Read as a browser reads it,
// and kept only if it stays on this origin; what goes out is the path as parsed, with no
// character that cannot stand in a Location header.
function safeNext(next: string | undefined): string {
  if (!next?.startsWith('/')) return '/';
  const base = 'http://this.server';
  try {
    const url = new URL(next, base);
    return url.origin === base ? `${url.pathname}${url.search}${url.hash}` : '/';
  } catch {
    return '/';
  }
}
