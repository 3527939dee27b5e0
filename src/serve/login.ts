import type { Hono } from 'hono';
import { attempt, type TokenAuth, tooMany } from './auth.js';
import type { Csrf } from './csrf.js';
import type { Throttle } from './throttle.js';
import { loginPage, logoutPage } from './views/layout.js';

// GET /login: the form; POST /login: a right token sets the cookie and goes on to `next`;
// a wrong one counts against the client (see Throttle). /logout: a button that ends this
// browser's session.
export function loginRoutes(app: Hono, auth: TokenAuth | null, csrf: Csrf, throttle: Throttle): void {
  app.get('/login', (c) => c.html(loginPage(csrf.token(c), safeNext(c.req.query('next')), auth === null, null)));
  app.post('/login', async (c) => {
    const form = await c.req.parseBody();
    const next = safeNext(typeof form.next === 'string' ? form.next : undefined);
    if (!auth) return c.redirect(next, 303);
    const tried = attempt(c, auth, throttle, typeof form.token === 'string' ? form.token.trim() : '');
    if (tried === false) return c.html(loginPage(csrf.token(c), next, false, 'That is not the token.'), 403);
    if (tried !== true) return c.html(loginPage(csrf.token(c), next, false, tooMany(tried)), 429, { 'retry-after': String(Math.ceil(tried / 1000)) });
    auth.login(c);
    return c.redirect(next, 303);
  });
  app.get('/logout', (c) => c.html(logoutPage(csrf.token(c), auth === null)));
  app.post('/logout', (c) => {
    auth?.logout(c);
    return c.redirect(auth ? '/login' : '/', 303);
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
