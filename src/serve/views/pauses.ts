import { html } from 'hono/html';
import type { Paused, PauseEvent } from '../../store/jobs.js';
import type { Html } from './layout.js';
import { time } from './parts.js';

// The fleet's pause (`disable --all`), on every page that lists or shows jobs: while it holds,
// no job runs whatever its own state says. Always there (empty when none), so that a live
// refresh can put it in and take it out.
export function fleetBanner(fleet: Paused | null): Html {
  const body = fleet
    ? html`<p class="notice warn" role="status"><strong>Fleet paused</strong> since ${time(fleet.since)}${fleet.by ? ` by ${fleet.by}` : ''}${fleet.until ? html`, until ${time(fleet.until)}` : ''}${fleet.reason ? `: ${fleet.reason}` : ''}. No job runs; requests wait. <code>cronguard enable --all</code> resumes it.</p>`
    : '';
  return html`<div id="fleet" data-live>${body}</div>`;
}

// A job's pauses and resumes, and the fleet's, newest first: when, what, who, until, why.
export function pauseEventsTable(events: readonly PauseEvent[]): Html | string {
  if (events.length === 0) return html`<p class="muted">Never paused.</p>`;
  return html`<table class="pauses">
<thead><tr><th>When</th><th>What</th><th>Who</th><th>Until</th><th>Why</th></tr></thead>
<tbody>${events.map(
    (e) => html`<tr data-event="${e.id}">
<td data-label="When">${time(e.at)}</td>
<td data-label="What">${e.action === 'pause' ? 'paused' : 'resumed'}${e.fleet_wide ? html` <span class="state disabled">fleet-wide</span>` : ''}</td>
<td data-label="Who">${e.by}</td>
<td data-label="Until">${e.until ? time(e.until) : '-'}</td>
<td data-label="Why">${e.reason ?? ''}</td>
</tr>`,
  )}</tbody></table>`;
}
