import { createHash } from 'node:crypto';

// The page's stylesheet and its one small script, served by cronguard itself. The script
// only improves a page that works without it: it shows times in the browser's zone and,
// through server-sent events, replaces the parts of the page marked data-live with their
// current version (fetched as the page itself, so the server renders and escapes it) and
// appends a running job's output as it comes.

export const CLIENT_JS = `'use strict';
(() => {
  // Today's times to the second; other days with their date.
  const today = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });
  const other = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
  const localTimes = (root) => {
    const now = new Date().toDateString();
    for (const t of root.querySelectorAll('time[datetime]')) {
      const d = new Date(t.getAttribute('datetime'));
      if (Number.isNaN(d.getTime())) continue;
      t.textContent = (d.toDateString() === now ? today : other).format(d);
      t.title = d.toString();
    }
  };
  localTimes(document);
  // A run's output opens at its end, where the error usually is, and stays there as more
  // comes while the reader is there.
  const output = () => document.getElementById('output');
  const atEnd = (box) => box.scrollTop + box.clientHeight >= box.scrollHeight - 8;
  const toEnd = (box) => { if (box) box.scrollTop = box.scrollHeight; };
  toEnd(output());
  const source = document.body.dataset.events;
  if (!source || !window.EventSource) return;
  // A line saying that what the page shows may be out of date, and why.
  const trouble = (text) => {
    const line = document.getElementById('live-status');
    if (line) { line.textContent = text || ''; line.hidden = !text; }
  };
  // id: the change event's, so that the server may answer every open page from the one read
  // that found the change; none (after a reconnect, a run's end): read afresh.
  let busy = false, again = false, wanted = '';
  const refresh = async (id) => {
    if (busy) { wanted = again && !wanted ? '' : (id || ''); again = true; return; }
    busy = true;
    try {
      const response = await fetch(location.href, { headers: { 'X-Cronguard-Refresh': id || 'fresh' }, credentials: 'same-origin' });
      const fresh = new DOMParser().parseFromString(await response.text(), 'text/html');
      if (!response.ok) {
        const why = fresh.querySelector('main p');
        trouble((why ? why.textContent.replace(/\\.?$/, '. ') : '') + 'This page shows what it last knew, and updates again once the log is back.');
        return;
      }
      trouble('');
      const following = !output() || atEnd(output());
      for (const part of document.querySelectorAll('[data-live][id]')) {
        const next = fresh.getElementById(part.id);
        // A part the reader is typing in stays as it is.
        if (!next || part.contains(document.activeElement)) continue;
        part.replaceWith(document.importNode(next, true));
      }
      localTimes(document);
      // The title carries counts (the failing jobs'), for a browser tab.
      document.title = fresh.title;
      if (following) toEnd(output());
      document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
    } catch (e) {
      // The server is restarting or gone; the event stream reconnects on its own.
    } finally {
      busy = false;
      if (again) { again = false; refresh(wanted); }
    }
  };
  const events = new EventSource(source);
  events.addEventListener('error', () => trouble('The connection to cronguard serve was lost; reconnecting.'));
  // Connected again: what changed meanwhile was never sent, so the page fetches itself.
  let connected = false;
  events.addEventListener('open', () => { trouble(''); if (connected) refresh(); connected = true; });
  events.addEventListener('change', (e) => refresh(e.lastEventId));
  events.addEventListener('output', (e) => {
    const out = output();
    if (!out) return;
    const following = atEnd(out);
    const pageAtEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 8;
    out.insertAdjacentHTML('beforeend', e.data);
    if (following) toEnd(out);
    if (pageAtEnd) window.scrollTo(0, document.body.scrollHeight);
  });
  events.addEventListener('end', () => { events.close(); refresh(); });
})();
`;

export const CSS = `:root { color-scheme: light dark; --fg: #1d232a; --bg: #fff; --muted: #667; --line: #dde; --card: #f5f6f8;
  --ok: #137333; --bad: #c5221f; --warn: #a15c00; --run: #0b57d0; --on-run: #fff; --out-bg: #0f1216; --out-edge: #0f1216; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e8eb; --bg: #15181c; --muted: #9aa; --line: #333a44; --card: #1e2329;
  --ok: #5cc77a; --bad: #ff6b63; --warn: #f0b050; --run: #7fb0ff; --on-run: #0d1117; --out-bg: #050608; --out-edge: #6b7687; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1em; align-items: baseline; padding: .6em 1em; border-bottom: 1px solid var(--line); }
header nav a { margin-right: 1em; } .brand { font-weight: 700; text-decoration: none; }
main { padding: .5em 1em 2em; max-width: 1200px; }
a { color: var(--run); }
h1 { font-size: 1.4em; margin: .4em 0; } h1.name { word-break: break-all; } h2 { font-size: 1.15em; margin: 1.4em 0 .4em; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .35em .5em; border-bottom: 1px solid var(--line); vertical-align: top; }
th a { color: inherit; text-decoration: none; }
td:first-child { overflow-wrap: anywhere; min-width: 9em; }
tr.failing td:first-child { border-left: 4px solid var(--bad); }
tr.stale td:first-child { border-left: 4px solid var(--warn); }
.status { font-weight: 600; white-space: nowrap; } .s-succeeded { color: var(--ok); } .s-running, .s-pending { color: var(--run); }
.s-failed, .s-timed_out, .s-killed, .s-lock_lost, .s-abandoned { color: var(--bad); } .s-cancelled { color: var(--muted); }
.state.running { color: var(--run); font-weight: 600; } .state.disabled { color: var(--warn); font-weight: 600; }
.slots { margin: 0; padding: 0; list-style: none; } a.slot { white-space: nowrap; }
.reason { font-style: italic; word-break: break-word; }
.tag { font-size: .8em; padding: 0 .4em; border-radius: .6em; background: var(--card); border: 1px solid var(--line); }
.tag.stale { color: var(--warn); border-color: var(--warn); }
.bad { color: var(--bad); font-weight: 600; } .muted { color: var(--muted); }
.spark { vertical-align: middle; max-width: 100%; } .bar-ok { fill: var(--ok); } .bar-fail { fill: var(--bad); }
.filters { display: flex; flex-wrap: wrap; gap: .5em; margin: .5em 0; }
input, select, textarea, button { font: inherit; padding: .35em .5em; border: 1px solid var(--line); border-radius: 4px; background: var(--bg); color: var(--fg); }
button { background: var(--run); color: var(--on-run); border: 0; cursor: pointer; }
.actions { display: flex; flex-wrap: wrap; gap: 1em; margin: 1em 0; align-items: flex-start; }
.card { display: flex; flex-direction: column; gap: .4em; padding: .8em; background: var(--card); border-radius: 6px; min-width: 16em; flex: 1; }
.card label { display: flex; flex-direction: column; gap: .2em; }
.stop button { background: var(--bad); color: var(--on-run); } #header .stop { display: inline-flex; min-width: 10em; margin-top: .6em; }
.facts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .25em 1em; margin: 0; }
.facts dt { color: var(--muted); } .facts dd { margin: 0; word-break: break-word; }
code { font: .9em ui-monospace, monospace; word-break: break-all; }
code.arg { padding: 0 .3em; border: 1px solid var(--line); border-radius: 3px; white-space: pre-wrap; }
h1 small { font-weight: 400; color: var(--muted); }
.output { font: 13px/1.35 ui-monospace, monospace; background: var(--out-bg); color: #d8dee4; padding: .8em; border-radius: 6px; border: 1px solid var(--out-edge);
  white-space: pre-wrap; word-break: break-all; max-height: 80vh; overflow: auto; }
.notice { padding: .5em .8em; border-radius: 4px; background: var(--card); border-left: 4px solid var(--ok); }
.notice.error { border-color: var(--bad); } .notice.warn { border-color: var(--warn); }
.pager a { margin-right: 1em; }
.b { font-weight: 700; } .dim { opacity: .7; } .i { font-style: italic; } .u { text-decoration: underline; }
.fg0 { color: #555; } .fg1 { color: #ff6b63; } .fg2 { color: #5cc77a; } .fg3 { color: #e5c07b; } .fg4 { color: #61afef; } .fg5 { color: #c678dd; }
.fg6 { color: #56b6c2; } .fg7 { color: #d8dee4; } .fg8 { color: #888; } .fg9 { color: #ff8c85; } .fg10 { color: #8be09f; } .fg11 { color: #ffe08a; }
.fg12 { color: #8cc8ff; } .fg13 { color: #e0a0f0; } .fg14 { color: #8ee0ea; } .fg15 { color: #fff; }
.bg0 { background: #000; } .bg1 { background: #8b1e1a; } .bg2 { background: #1e6b35; } .bg3 { background: #7a6212; } .bg4 { background: #1d4f91; }
.bg5 { background: #6b2f7f; } .bg6 { background: #1c6670; } .bg7 { background: #aaa; } .bg8 { background: #444; } .bg9 { background: #c0392b; }
.bg10 { background: #27ae60; } .bg11 { background: #b7950b; } .bg12 { background: #2e86de; } .bg13 { background: #8e44ad; } .bg14 { background: #17a2b8; } .bg15 { background: #ddd; }
#failing-count { text-decoration: none; }
@media (max-width: 700px) {
  table, tbody, tr, td { display: block; } thead { display: none; }
  td { border: 0; padding: .1em 0; }
  td::before { content: attr(data-label) ": "; color: var(--muted); }
  tr.failing, tr.stale { padding-left: .5em; } tr.failing { border-left: 4px solid var(--bad); } tr.stale { border-left: 4px solid var(--warn); }
  tr.failing td:first-child, tr.stale td:first-child { border-left: 0; }
  main { padding: .5em .6em 2em; }
  /* The jobs list as cards of three lines, the failing ones first: six and more to a screen. */
  table.jobs tbody { display: flex; flex-direction: column; }
  table.jobs tr { display: grid; grid-template-columns: minmax(0, 1fr) auto auto; column-gap: .6em; align-items: center;
    border-bottom: 1px solid var(--line); padding: .3em 0; }
  table.jobs tr.failing { order: -1; }
  table.jobs td::before { content: none; }
  table.jobs td[data-label="Job"] { grid-column: 1 / 3; font-weight: 600; min-width: 0; }
  table.jobs td[data-label="State"] { grid-column: 3; text-align: right; }
  table.jobs td[data-label="Last run"] { grid-column: 1; font-size: .9em; }
  table.jobs td[data-label="OK"] { grid-column: 2; text-align: right; font-size: .9em; }
  table.jobs td[data-label="Recent"] { grid-column: 3; text-align: right; }
  table.jobs td[data-label="Last success"], table.jobs td[data-label="Requests"] { grid-column: 1 / -1; font-size: .9em; order: 1; }
  table.jobs td[data-label="Last success"]::before { content: "last success "; color: var(--muted); }
  table.jobs td[data-label="Median"], table.jobs td.none, table.jobs td.same { display: none; }
}
`;

// Changes with the content, so a browser may keep the files for good (see server.ts).
export const ASSET_VERSION = createHash('sha256').update(CLIENT_JS).update(CSS).digest('hex').slice(0, 10);
