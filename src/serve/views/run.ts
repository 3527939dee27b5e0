import { html, raw } from 'hono/html';
import type { RunRow } from '../../store/types.js';
import type { Html } from './layout.js';
import { duration, statusBadge, time } from './parts.js';

// Where a running run's output is while the page is shown.
export type LiveOutput =
  // This host's live copy, read so far (HTML), and how many bytes of it that was.
  | { readonly kind: 'here'; readonly html: string; readonly bytes: number }
  | { readonly kind: 'elsewhere' }
  | { readonly kind: 'none'; readonly why: string };

// A run: its header, then its output (ANSI colours as spans, everything escaped).
// `csrf`: this browser's form token, for the Stop button of a running run; null on a
// read-only server (no forms).
export function runView(r: RunRow, outputHtml: string, cut: string | null, live: LiveOutput | null, csrf: string | null): Html {
  const rows: [string, Html | string][] = [
    ['Job', html`<a href="/jobs/${encodeURIComponent(r.job)}">${r.job}</a>`],
    ['Status', statusBadge(r.status)],
    ['Exit', r.exit_code === null ? '-' : String(r.exit_code)],
    ['Signal', r.signal ?? '-'],
    ['Host', r.host],
    ['PID', String(r.pid)],
    ['Trigger', r.trigger],
    ['Attempt', String(r.attempt)],
    ['Started', time(r.started_at)],
    ['Ended', time(r.finished_at)],
    ['Duration', r.status === 'running' ? 'running' : duration(r.duration_ms)],
    ['Overlaps', String(r.overlaps)],
    ['Request', r.request_id === null ? '-' : html`<a href="/api/requests/${r.request_id}">${r.request_id}</a>`],
    ['Command', html`<code>${r.command}</code>`],
  ];
  if (r.error) rows.push(['Note', r.error]);
  return html`<h1>Run ${r.id} <small>${r.job}</small></h1>
<div id="header" data-live>
<dl class="facts">${rows.map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>
${r.status === 'running' && csrf !== null ? stopForm(`/runs/${r.id}/stop`, csrf) : ''}
</div>
<h2>Output</h2>
<div id="output-box" data-live>${output(r, outputHtml, cut, live)}</div>`;
}

function output(r: RunRow, outputHtml: string, cut: string | null, live: LiveOutput | null): Html {
  if (live?.kind === 'here') {
    return html`<p class="muted live-note">Running: output so far, following live.</p><pre class="output" id="output" data-from="${live.bytes}">${raw(live.html)}</pre>`;
  }
  if (live?.kind === 'elsewhere') return html`<p class="muted">Running on ${r.host}: its output is shown here when it ends (or follow it there: cronguard logs -f ${r.id}).</p>`;
  if (live?.kind === 'none') return html`<p class="muted">${live.why}</p>`;
  if (r.output === null) return html`<p class="muted">No output kept (${r.status === 'abandoned' ? 'its wrapper vanished' : 'the run captured none'}).</p>`;
  const notes = [r.output_truncated ? 'Output truncated: this is its last part (the run keeps the last --capture bytes).' : null, cut].filter(Boolean);
  return html`${notes.map((n) => html`<p class="notice warn">${n}</p>`)}${r.output === '' ? html`<p class="muted">No output.</p>` : html`<pre class="output" id="output">${raw(outputHtml)}</pre>`}`;
}

// Stops the run's whole process group (as cronguard stop), wherever it runs.
export function stopForm(action: string, csrf: string): Html {
  return html`<form method="post" action="${action}" class="card stop"><input type="hidden" name="csrf" value="${csrf}"><button type="submit" name="stop">Stop</button></form>`;
}
