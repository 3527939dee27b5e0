import { html } from 'hono/html';
import { type Html, page } from './layout.js';

// The login form of a server with --token-file: the token once, then a cookie.
export function loginPage(csrf: string, next: string, open: boolean, wrong: boolean): Html {
  if (open) return page({ title: 'Log in' }, html`<h1>Log in</h1><p>This server needs no login. <a href="/">All jobs</a></p>`);
  const notice = wrong ? 'That is not the token.' : null;
  return page(
    { title: 'Log in', notice, noticeKind: 'error' },
    html`<h1>Log in</h1>
<form method="post" action="/login" class="card">
<input type="hidden" name="csrf" value="${csrf}">
<input type="hidden" name="next" value="${next}">
<label>Token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit">Log in</button>
</form>
<p class="muted">The token is the first line of the server's --token-file.</p>`,
  );
}
