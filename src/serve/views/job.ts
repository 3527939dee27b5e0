import { html } from 'hono/html';
import { jobSchedule } from '../../schedule/job.js';
import { blockedSince, failedTargets, type JobStatus, type Paused, type PauseEvent } from '../../store/jobs.js';
import { type LeasedJobStatus, leaseText } from '../../store/leases.js';
import type { RequestRow } from '../../store/requests.js';
import type { JobSlots, SlottedJobStatus } from '../../store/slot-holders.js';
import { RUN_STATUSES, type RunRow, type RunStatus } from '../../store/types.js';
import { slotsState, stateCell } from './jobs.js';
import type { Html } from './layout.js';
import { duration, percent, sparkline, statusBadge, time } from './parts.js';
import { fleetBanner, pauseEventsTable } from './pauses.js';
import { stopForm } from './run.js';

export const RUNS_PER_PAGE = 25;

export interface RunsQuery {
  readonly status: RunStatus | null;
  readonly host: string | null;
  readonly before: number | null;
}

export interface JobPage {
  readonly job: LeasedJobStatus & SlottedJobStatus;
  readonly runs: readonly RunRow[];
  // Whether older runs follow (the query asked for one more than a page).
  readonly more: boolean;
  readonly requests: readonly RequestRow[];
  readonly query: RunsQuery;
  // The CSRF field of this browser's forms; null on a read-only server (no forms).
  readonly csrf: string | null;
  // The request this browser just made with Run now, followed until its run ends.
  readonly requested: RequestRow | null;
  // The fleet's pause, if it holds; the job's pauses and resumes, and the fleet's.
  readonly fleet: Paused | null;
  readonly events: readonly PauseEvent[];
}

// The stored schedule, and when it next makes the job due (or since when it is due); one
// that cannot be read says why.
function scheduleCell(j: JobStatus): Html | string {
  const s = jobSchedule(j, Date.now());
  if (s === null) return html`<span class="muted">none</span>`;
  if (s.due === null) return html`<code>${s.text}</code> <span class="bad">cannot be read: ${s.problem}</span>`;
  return html`<code>${s.text}</code> <span class="muted">${s.due.due ? 'due since' : 'next'}</span> ${time(s.due.at.toISOString())}`;
}

// A job: how it stands, its buttons, its runs (paged, filtered) and its requests.
export function jobView(p: JobPage): Html {
  const j = p.job;
  const name = encodeURIComponent(j.job);
  return html`${fleetBanner(p.fleet)}${p.requested ? requestNotice(p.requested, j.state === 'disabled') : ''}<h1 class="name">${j.job}</h1>
<div id="summary" data-live>
<dl class="facts">
<dt>State</dt><dd>${j.state === 'running' && j.slots ? slotsState(j.slots) : stateCell(j)}${j.state === 'disabled' ? pausedBy(j) : ''}</dd>
${j.state === 'running' && j.slots ? html`<dt>Slots</dt><dd id="slots">${slotsList(j.slots)}</dd>` : ''}
${j.lease === null ? '' : html`<dt>Lease</dt><dd id="lease">held by ${leaseText(j.lease)}, since ${time(j.lease.since)}</dd>`}
${blockedSince(j) === null ? '' : html`<dt>Blocked</dt><dd class="bad">skipped ${time(j.blocked_at)}: its lock was held by ${j.blocked_by}, who does not share the job</dd>`}
<dt>Last run</dt><dd>${j.last_run_id === null ? 'none finished' : html`<a href="/runs/${j.last_run_id}">run ${j.last_run_id}</a> ${statusBadge(j.last_status, j.last_exit_code, j.last_signal)} ${time(j.last_started_at)}, ${duration(j.last_duration_ms)}`}</dd>
${j.failed_requests.length === 0 ? '' : html`<dt>Failing</dt><dd id="failing" class="bad">${failedTargets(j)}</dd>`}
<dt>Last success</dt><dd>${j.last_success_run_id === null ? html`<span class="bad">never</span>` : html`<a href="/runs/${j.last_success_run_id}">run ${j.last_success_run_id}</a> ${time(j.last_success_at)}`}</dd>
<dt>Recent</dt><dd>${sparkline(j.recent, 50)} ${percent(j.success_rate)} ok; median ${duration(j.duration_median_ms)}, p95 ${duration(j.duration_p95_ms)}</dd>
<dt>Schedule</dt><dd id="schedule">${scheduleCell(j)}</dd>
<dt>Command</dt><dd><code>${j.command ?? '-'}</code></dd>
<dt>Host</dt><dd>${j.host ?? '-'}${j.last_seen_at ? html`, last seen ${time(j.last_seen_at)}` : ''}</dd>
<dt>Requests</dt><dd>${j.pending_requests} pending</dd>
</dl>
</div>
${p.csrf === null ? '' : actions(j, name, p.csrf)}
<h2>Runs</h2>
<form method="get" action="/jobs/${name}" class="filters">
<select name="status" aria-label="status"><option value="">any status</option>${RUN_STATUSES.map((s) => html`<option${s === p.query.status ? ' selected' : ''}>${s}</option>`)}</select>
<input type="text" name="host" value="${p.query.host ?? ''}" placeholder="host" aria-label="host">
<button type="submit">Filter</button>
</form>
<div id="runs" data-live>${runsTable(p.runs)}</div>
${pager(name, p)}
<h2>Requests</h2>
<div id="requests" data-live>${requestsTable(p.requests)}</div>
<h2>Pauses</h2>
<div id="pauses" data-live>${pauseEventsTable(p.events)}</div>`;
}

// Who holds each slot held (--max-running), in slot order: the run, its host and pid, since when.
function slotsList(s: JobSlots): Html {
  return html`<ul class="slots">${s.running.map(
    (h) => html`<li data-slot="${h.slot}">slot ${h.slot}: <a href="/runs/${h.run_id}">run ${h.run_id}</a> on ${h.host}, pid ${h.pid}, since ${time(h.since)}</li>`,
  )}</ul>`;
}

// Who paused it, and until when.
function pausedBy(j: JobStatus): Html {
  return html` <span class="muted">${j.disabled_by ? `by ${j.disabled_by}` : ''}${j.disabled_until ? html`, until ${time(j.disabled_until)}` : ''}</span>`;
}

function actions(j: JobStatus, name: string, csrf: string): Html {
  const token = html`<input type="hidden" name="csrf" value="${csrf}">`;
  const pause =
    j.state === 'disabled' && !j.disabled_fleet_wide
      ? html`<form method="post" action="/jobs/${name}/resume" class="card">${token}<button type="submit" name="resume">Resume</button></form>`
      : html`<form method="post" action="/jobs/${name}/pause" class="card">${token}<label>Reason <input type="text" name="reason" maxlength="1000" placeholder="why (optional)"></label><button type="submit" name="pause">Pause</button></form>`;
  return html`<div class="actions">
<form method="post" action="/jobs/${name}/run" class="card">${token}
<label>Arguments <textarea name="args" rows="2" placeholder="optional: one argument per line" aria-describedby="args-help"></textarea></label>
<button type="submit" name="run">Run now</button>
<small id="args-help" class="muted">Appended to the command line of the run that serves the request (all of them with --batch).</small>
</form>
${pause}
${j.state === 'running' ? stopForm(`/jobs/${name}/stop`, csrf) : ''}
<form method="post" action="/jobs/${name}/schedule" class="card">${token}
<label>Schedule <input type="text" name="schedule" value="${j.schedule ?? ''}" maxlength="200" placeholder="every 15m, 0 3 * * 1-5, TZ=Europe/Warsaw 0 3 * * *" aria-describedby="schedule-help"></label>
<button type="submit" name="set-schedule">Save schedule</button>
<small id="schedule-help" class="muted">Empty clears it. The crontab line keeps the command.</small>
</form>
</div>`;
}

export function runsTable(runs: readonly RunRow[]): Html | string {
  if (runs.length === 0) return html`<p class="muted">No runs match.</p>`;
  // The slot is worth a column only where the job ran several copies at once, as in history.
  const slotted = runs.some((r) => (r.max_running ?? 1) > 1);
  return html`<table class="runs">
<thead><tr><th>Run</th><th>Status</th><th>Started</th><th>Duration</th><th>Host</th>${slotted ? html`<th>Slot</th>` : ''}<th>Trigger</th></tr></thead>
<tbody>${runs.map(
    (r) => html`<tr data-run="${r.id}">
<td data-label="Run"><a href="/runs/${r.id}">${r.id}</a></td>
<td data-label="Status">${statusBadge(r.status, r.exit_code, r.signal)}</td>
<td data-label="Started">${time(r.started_at)}</td>
<td data-label="Duration">${r.status === 'running' ? 'running' : duration(r.duration_ms)}</td>
<td data-label="Host">${r.host}</td>${slotted ? html`<td data-label="Slot">${r.slot ?? 0}</td>` : ''}
<td data-label="Trigger">${r.trigger}${r.attempt > 1 ? ` #${r.attempt}` : ''}${r.overlaps ? html` <span class="muted">(${r.overlaps} skipped)</span>` : ''}</td>
</tr>`,
  )}</tbody></table>`;
}

function pager(name: string, p: JobPage): Html | string {
  const last = p.runs.at(-1);
  const base = { ...(p.query.status ? { status: p.query.status } : {}), ...(p.query.host ? { host: p.query.host } : {}) };
  const newest = p.query.before === null ? '' : html`<a href="/jobs/${name}?${new URLSearchParams(base)}">newest</a>`;
  const older = p.more && last ? html`<a href="/jobs/${name}?${new URLSearchParams({ ...base, before: String(last.id) })}" rel="next">older runs</a>` : '';
  return newest || older ? html`<p class="pager">${newest} ${older}</p>` : '';
}

// What became of the request: queued, running, or how its run ended.
function requestNotice(q: RequestRow, paused: boolean): Html {
  const run = q.run_id === null ? '' : html` by <a href="/runs/${q.run_id}">run ${q.run_id}</a>`;
  const waits = paused ? 'the job is paused, so it waits until the job is resumed' : "the job's next invocation (or its waiting loop) runs it";
  const text = q.status === 'pending' ? html`Request ${q.id} queued: ${waits}.` : html`Request ${q.id} ${statusBadge(q.status, q.exit_code)}${run}.`;
  const kind = q.status === 'failed' || q.status === 'cancelled' ? 'error' : q.status === 'pending' && paused ? 'warn' : 'ok';
  return html`<div id="notice" data-live><p class="notice ${kind}" role="status">${text}</p></div>`;
}

export function requestsTable(requests: readonly RequestRow[]): Html | string {
  if (requests.length === 0) return html`<p class="muted">No requests.</p>`;
  return html`<table class="requests">
<thead><tr><th>Request</th><th>Status</th><th>Requested</th><th>By</th><th>Arguments</th><th>Run</th></tr></thead>
<tbody>${requests.map(
    (q) => html`<tr data-request="${q.id}">
<td data-label="Request">${q.id}</td>
<td data-label="Status">${statusBadge(q.status, q.exit_code)}</td>
<td data-label="Requested">${time(q.requested_at)}${q.not_before > q.requested_at ? html`, not before ${time(q.not_before)}` : ''}</td>
<td data-label="By">${q.requested_by ?? '-'}</td>
<td data-label="Arguments">${q.args.map((a) => html`<code class="arg">${a}</code> `)}</td>
<td data-label="Run">${q.run_id === null ? '-' : html`<a href="/runs/${q.run_id}">${q.run_id}</a>`}</td>
</tr>`,
  )}</tbody></table>`;
}
