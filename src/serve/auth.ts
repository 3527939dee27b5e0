import { createHmac } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { badRequest } from './context.js';
import { type Csrf, equal, originProblem } from './csrf.js';
import { clientOf, viaHttps } from './proxy.js';
import type { Throttle } from './throttle.js';

const COOKIE = 'cronguard_session';

// --token-file: the API takes the token as a bearer token; the pages take a cookie the
// login form sets. The cookie holds an HMAC of the token, not the token: it stays valid
// across restarts, dies when the token changes, and never shows the token itself. It is
// Secure when the browser reached us over TLS, and SameSite=Lax so that a link from another
// site opens the page rather than the login form (a GET changes nothing).
export class TokenAuth {
  // `token` is the one in force now (see TokenFile); null refuses everything.
  constructor(private readonly token: () => string | null) {}

  matches(token: string): boolean {
    const current = this.token();
    return current !== null && equal(token, current);
  }

  cookie(c: Context): boolean {
    const current = this.token();
    const value = getCookie(c, COOKIE);
    return current !== null && value !== undefined && equal(value, session(current));
  }

  login(c: Context): void {
    const current = this.token();
    if (current !== null) setCookie(c, COOKIE, session(current), { httpOnly: true, sameSite: 'Lax', path: '/', secure: viaHttps(c) });
  }

  // Ends this browser's session; every session ends with the token (rotate the file).
  logout(c: Context): void {
    deleteCookie(c, COOKIE, { path: '/', secure: viaHttps(c) });
  }
}

function session(token: string): string {
  return createHmac('sha256', token).update('cronguard session').digest('hex');
}

// The token of an `Authorization: Bearer` header, spaces and all (a passphrase), or null.
function bearerOf(c: Context): string | null {
  const match = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '');
  return match ? (match[1] as string).trim() : null;
}

// A token a client tries: refused unseen while the client must wait (the milliseconds),
// else checked and counted for or against the client.
export function attempt(c: Context, auth: TokenAuth, throttle: Throttle, token: string): boolean | number {
  const client = clientOf(c).address ?? '-';
  const wait = throttle.wait(client);
  if (wait > 0) return wait;
  const right = auth.matches(token);
  if (right) throttle.succeeded(client);
  else throttle.failed(client);
  return right;
}

export function tooMany(wait: number): string {
  return `Too many wrong tokens from your address: try again in ${Math.ceil(wait / 1000)} s.`;
}

const OPEN = /^\/(login|logout|assets\/.*)$/;

// Who may do what. Without a token, anyone who reaches the server (loopback, or a
// read-only server) may read; a page POST needs the CSRF field, an API POST a JSON body
// from this origin (a cross-site page cannot send one without a CORS preflight we never
// answer). With a token: the API wants it as a bearer token (or, for reading, the login
// cookie), the pages the cookie.
export function guard(auth: TokenAuth | null, csrf: Csrf, readOnly: boolean, throttle: Throttle): MiddlewareHandler {
  return async (c, next) => {
    const path = c.req.path;
    const api = path.startsWith('/api/') || path === '/metrics';
    const post = c.req.method === 'POST';
    let bearer = false;
    if (auth && !OPEN.test(path)) {
      const given = bearerOf(c);
      const tried = given === null ? false : attempt(c, auth, throttle, given);
      if (typeof tried === 'number') {
        const seconds = String(Math.ceil(tried / 1000));
        return api ? c.json({ error: tooMany(tried) }, 429, { 'retry-after': seconds }) : c.text(tooMany(tried), 429, { 'retry-after': seconds });
      }
      bearer = tried;
      const cookie = auth.cookie(c);
      if (cookie) c.set('signedIn', true);
      if (api && !(bearer || (cookie && !post))) {
        return c.json({ error: 'a bearer token is needed (Authorization: Bearer ...)' }, 401, { 'www-authenticate': 'Bearer realm="cronguard"' });
      }
      if (!api && !cookie) {
        if (post || path.startsWith('/events')) return c.text('log in first', 403);
        return c.redirect(`/login?next=${encodeURIComponent(path + new URL(c.req.url).search)}`, 303);
      }
    }
    if (!post) return next();
    if (readOnly && !OPEN.test(path)) return api ? c.json({ error: 'this server is read-only' }, 403) : c.text('this server is read-only', 403);
    const foreign = originProblem(c);
    if (api) {
      const json = /^application\/json\b/i.test(c.req.header('content-type') ?? '');
      if (!bearer && !(json && foreign === null)) return c.json({ error: foreign ?? 'send JSON (Content-Type: application/json) from this origin, or a bearer token' }, 403);
      return next();
    }
    if (foreign !== null) return c.text(foreign, 403);
    // Every form is read here first (the routes get it from Hono's cache): one that cannot
    // be parsed (a broken multipart body) is the sender's mistake, not ours.
    const form = await c.req.parseBody().catch(() => null);
    if (form === null) return badRequest(c, 'The form could not be read.');
    if (!csrf.valid(c, form.csrf)) return c.text('this form has expired or did not come from this server: reload the page and try again', 403);
    return next();
  };
}
