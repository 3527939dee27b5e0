import { tryGetContext } from 'hono/context-storage';
import { html } from 'hono/html';
import { ASSET_VERSION } from '../assets.js';

export type Html = ReturnType<typeof html>;

export interface PageOptions {
  readonly title: string;
  // Server-sent events that keep the page current (see sse.ts); none for a static page.
  readonly events?: string;
  // A line above the content: a request queued, the log unreachable.
  readonly notice?: Html | string | null;
  readonly noticeKind?: 'ok' | 'error';
}

// Every page's frame: a phone-sized viewport, the stylesheet and the small script, both
// served by cronguard itself (no CDN: an operator's network may have none).
export function page(options: PageOptions, body: Html): Html {
  const notice = options.notice ? html`<p class="notice ${options.noticeKind ?? 'ok'}" role="status">${options.notice}</p>` : '';
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · cronguard</title>
<link rel="stylesheet" href="/assets/style.css?v=${ASSET_VERSION}">
<script src="/assets/app.js?v=${ASSET_VERSION}" defer></script>
</head>
<body${options.events ? html` data-events="${options.events}"` : ''}>
<header><a href="/" class="brand">cronguard</a><nav><a href="/">jobs</a><a href="/metrics">metrics</a>${signedIn() ? html`<a href="/logout">log out</a>` : ''}</nav></header>
<main>
${options.events ? html`<p id="live-status" class="notice error" role="status" hidden></p>` : ''}
${notice}
${body}
</main>
</body>
</html>`;
}

// A page that says what went wrong, never how the code got there.
export function errorPage(title: string, message: string, detail?: string): Html {
  return page({ title }, html`<h1>${title}</h1><p>${message}</p>${detail ? html`<p class="muted">${detail}</p>` : ''}<p><a href="/">All jobs</a></p>`);
}

// Whether the page goes to a browser logged in with the token (the guard says so through
// Hono's context storage, so that no page has to pass it on).
function signedIn(): boolean {
  return tryGetContext<{ Variables: { signedIn?: boolean } }>()?.get('signedIn') === true;
}

// The login form of a server with --token-file: the token once, then a cookie.
export function loginPage(csrf: string, next: string, open: boolean, problem: string | null): Html {
  if (open) return page({ title: 'Log in' }, html`<h1>Log in</h1><p>This server needs no login. <a href="/">All jobs</a></p>`);
  return page(
    { title: 'Log in', notice: problem, noticeKind: 'error' },
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

// Logging out is a POST (with the CSRF field): a link on another site cannot do it.
export function logoutPage(csrf: string, open: boolean): Html {
  if (open) return page({ title: 'Log out' }, html`<h1>Log out</h1><p>This server needs no login. <a href="/">All jobs</a></p>`);
  return page(
    { title: 'Log out' },
    html`<h1>Log out</h1>
<form method="post" action="/logout" class="card">
<input type="hidden" name="csrf" value="${csrf}">
<button type="submit">Log out</button>
</form>
<p class="muted">This ends the session of this browser. Changing the token ends every session.</p>`,
  );
}
