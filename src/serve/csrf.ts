import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';

const COOKIE = 'cronguard_csrf';

// CSRF protection for the pages' forms: a random cookie per browser (HttpOnly,
// SameSite=Strict) and, in each form, an HMAC of it under a secret of this server process.
// Another site can neither read the cookie nor compute the field, and a browser does not
// send the cookie with another site's POST at all. A restart changes the secret: a form
// loaded before it is refused (403), and reloading the page fixes that.
export class Csrf {
  private readonly secret = randomBytes(32);

  // The form field for this browser, setting its cookie on first sight.
  token(c: Context): string {
    let id = getCookie(c, COOKIE);
    if (!id || !/^[0-9a-f]{32}$/.test(id)) {
      id = randomBytes(16).toString('hex');
      setCookie(c, COOKIE, id, { httpOnly: true, sameSite: 'Strict', path: '/' });
    }
    return this.sign(id);
  }

  // Whether a POST comes from one of our own forms: a matching field, and no Origin header
  // naming another site (a second line of defence where browsers send it).
  valid(c: Context, field: unknown): boolean {
    const id = getCookie(c, COOKIE);
    if (!id || typeof field !== 'string' || !sameOrigin(c)) return false;
    return equal(field, this.sign(id));
  }

  private sign(id: string): string {
    return createHmac('sha256', this.secret).update(id).digest('hex');
  }
}

// A request whose Origin (when the browser sends one) is this server as the browser
// addressed it.
export function sameOrigin(c: Context): boolean {
  const origin = c.req.header('origin');
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === c.req.header('host');
  } catch {
    return false;
  }
}

export function equal(a: string, b: string): boolean {
  const [x, y] = [Buffer.from(a), Buffer.from(b)];
  return x.length === y.length && timingSafeEqual(x, y);
}
