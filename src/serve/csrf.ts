import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { clientOf } from './proxy.js';

const COOKIE = 'cronguard_csrf';

// CSRF protection for the pages' forms: a random cookie per browser (HttpOnly,
// SameSite=Lax) and, in each form, an HMAC of it under a secret of this server process.
// Another site can neither read the cookie nor compute the field, and a browser does not
// send the cookie with another site's POST at all. Lax, not Strict: a browser following a
// link from another site must still send it, else this server would set a new one and
// every form in the tabs already open would be refused. A restart changes the secret: a
// form loaded before it is refused (403), and reloading the page fixes that.
export class Csrf {
  private readonly secret = randomBytes(32);

  // The form field for this browser, setting its cookie on first sight.
  token(c: Context): string {
    let id = getCookie(c, COOKIE);
    if (!id || !/^[0-9a-f]{32}$/.test(id)) {
      id = randomBytes(16).toString('hex');
      setCookie(c, COOKIE, id, { httpOnly: true, sameSite: 'Lax', path: '/', secure: clientOf(c).https === true });
    }
    return this.sign(id);
  }

  // Whether a POST comes from one of our own forms: a matching field (see originProblem
  // for the second line of defence).
  valid(c: Context, field: unknown): boolean {
    const id = getCookie(c, COOKIE);
    if (!id || typeof field !== 'string') return false;
    return equal(field, this.sign(id));
  }

  private sign(id: string): string {
    return createHmac('sha256', this.secret).update(id).digest('hex');
  }
}

// Why a POST's Origin (when the browser sends one) is not this server as the browser
// addressed it, or null when it is. Behind a proxy that rewrites Host, only the proxy's
// X-Forwarded-Host (--trust-proxy) says what that was.
export function originProblem(c: Context): string | null {
  const origin = c.req.header('origin');
  if (origin === undefined) return null;
  const client = clientOf(c);
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return `a POST from '${origin.slice(0, 100)}' is not taken: it names no site`;
  }
  if (url.host === client.host && (client.https === null || client.https === (url.protocol === 'https:'))) return null;
  return `a POST from ${url.origin} is not taken: this server is addressed as ${client.https ? 'https' : 'http'}://${client.host}` +
    ' (behind a reverse proxy: pass the Host header on, or give --trust-proxy and X-Forwarded-Host/-Proto)';
}

export function equal(a: string, b: string): boolean {
  const [x, y] = [Buffer.from(a), Buffer.from(b)];
  return x.length === y.length && timingSafeEqual(x, y);
}
