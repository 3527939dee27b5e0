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
<header><a href="/" class="brand">cronguard</a><nav><a href="/">jobs</a><a href="/metrics">metrics</a></nav></header>
<main>
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
