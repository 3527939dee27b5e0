import { html } from 'hono/html';
import { isFailing, type JobStatus } from '../../store/jobs.js';
import { type JobSlots, type SlottedJobStatus, slotsText } from '../../store/slot-holders.js';
import type { Html } from './layout.js';
import { age, duration, percent, sparkline, statusBadge, time } from './parts.js';

// The jobs page: a row per job, filtered by name and state, sorted by a column, failing and
// stale jobs marked.

export const STATE_FILTERS = ['running', 'idle', 'disabled', 'failing', 'stale'] as const;
export const SORTS = ['name', 'state', 'last', 'success', 'rate'] as const;
// The sort as a field of the filter form too: a phone's screen hides the table's headers.
const SORT_LABELS: Record<(typeof SORTS)[number], readonly [string, string]> = {
  name: ['name, A to Z', 'name, Z to A'],
  state: ['state', 'state, reversed'],
  last: ['last run, oldest first', 'last run, newest first'],
  success: ['last success, oldest first', 'last success, newest first'],
  rate: ['success rate, lowest first', 'success rate, highest first'],
};

// Rows per page: a thousand jobs in one page weigh megabytes, too much for a phone.
export const JOBS_PER_PAGE = 100;

export interface JobsQuery {
  readonly q: string;
  readonly state: (typeof STATE_FILTERS)[number] | null;
  readonly sort: (typeof SORTS)[number];
  readonly desc: boolean;
  // 1-based.
  readonly page: number;
}

// Unknown values fall back to the defaults rather than erroring: these come from links.
export function jobsQuery(get: (name: string) => string | undefined): JobsQuery {
  const sort = get('sort') ?? 'name';
  const key = sort.replace(/^-/, '');
  const state = get('state') ?? '';
  return {
    q: (get('q') ?? '').slice(0, 100),
    state: (STATE_FILTERS as readonly string[]).includes(state) ? (state as JobsQuery['state']) : null,
    sort: (SORTS as readonly string[]).includes(key) ? (key as JobsQuery['sort']) : 'name',
    desc: sort.startsWith('-'),
    page: /^\d{1,6}$/.test(get('page') ?? '') ? Math.max(1, Number(get('page'))) : 1,
  };
}


// Stale: idle for much longer than it should be. With --min-interval, twice the interval
// past its last start; otherwise more than 25 hours (a daily job that missed a day).
export function stale(j: JobStatus, now: number): boolean {
  if (j.state !== 'idle' || j.last_started_at === null) return false;
  const limit = j.min_interval_ms === null ? 25 * 3_600_000 : 2 * j.min_interval_ms;
  return now - Date.parse(j.last_started_at) > limit;
}

export function selectJobs<J extends JobStatus>(jobs: readonly J[], query: JobsQuery, now: number): J[] {
  const needle = query.q.toLowerCase();
  const shown = jobs.filter((j) => {
    if (needle && !j.job.toLowerCase().includes(needle)) return false;
    if (query.state === 'failing') return isFailing(j);
    if (query.state === 'stale') return stale(j, now);
    return query.state === null || j.state === query.state;
  });
  const key = (j: JobStatus): string | number => {
    if (query.sort === 'state') return `${j.state === 'idle' && isFailing(j) ? 'failing' : j.state} ${j.job}`;
    if (query.sort === 'last') return Date.parse(j.running_since ?? j.last_started_at ?? '1970-01-01');
    if (query.sort === 'success') return Date.parse(j.last_success_at ?? '1970-01-01');
    if (query.sort === 'rate') return j.success_rate ?? -1;
    return j.job;
  };
  const sign = query.desc ? -1 : 1;
  return shown.sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    return (x < y ? -1 : x > y ? 1 : a.job < b.job ? -1 : 1) * sign;
  });
}

export function jobsView(all: readonly SlottedJobStatus[], query: JobsQuery, now = Date.now()): Html {
  const selected = selectJobs(all, query, now);
  const first = (query.page - 1) * JOBS_PER_PAGE;
  const jobs = selected.slice(first, first + JOBS_PER_PAGE);
  const filters = { ...(query.q ? { q: query.q } : {}), ...(query.state ? { state: query.state } : {}) };
  const link = (sort: string) => {
    const desc = query.sort === sort && !query.desc;
    return `?${new URLSearchParams({ ...filters, sort: desc ? `-${sort}` : sort })}`;
  };
  const sorted = `${query.desc ? '-' : ''}${query.sort}`;
  const pageLink = (page: number, label: string, rel: 'prev' | 'next') =>
    html`<a href="?${new URLSearchParams({ ...filters, sort: sorted, page: String(page) })}" rel="${rel}">${label}</a>`;
  const pager = html`<p class="pager">${query.page > 1 ? pageLink(query.page - 1, 'previous', 'prev') : ''} ${first + JOBS_PER_PAGE < selected.length ? pageLink(query.page + 1, 'next', 'next') : ''}</p>`;
  // A page past the end (a bookmark, or fewer jobs since) leads back to the last one.
  const pages = Math.ceil(selected.length / JOBS_PER_PAGE);
  const pastEnd = html`<p>There is no page ${query.page}: the ${selected.length} job${selected.length === 1 ? '' : 's'} shown fit on ${pages === 1 ? 'one page' : `${pages} pages`}.</p>
<p class="pager">${pageLink(pages, pages === 1 ? 'back to the jobs' : `back to page ${pages}`, 'prev')}</p>`;
  const th = (label: string, sort: string) => {
    const mark = query.sort === sort ? (query.desc ? ' ▼' : ' ▲') : '';
    return html`<th><a href="${link(sort)}">${label}${mark}</a></th>`;
  };
  const shown = jobs.length > 0 && selected.length > jobs.length ? `${first + 1}–${first + jobs.length} of ${selected.length}` : String(selected.length);
  const counts = `${shown}${selected.length < all.length ? ` matching, of ${all.length}` : ''} job${all.length === 1 ? '' : 's'}`;
  // Of all jobs, whatever the filter: what someone on call looks for first (the title says it too).
  const failingNow = all.filter(isFailing).length;
  const failingLink = failingNow === 0 ? '' : html`<a id="failing-count" class="bad" href="/?state=failing">${failingNow} failing</a> · `;
  return html`<h1>Jobs</h1>
<form method="get" action="/" class="filters">
<input type="search" name="q" value="${query.q}" placeholder="name" aria-label="filter by name">
<select name="state" aria-label="filter by state"><option value="">any state</option>${STATE_FILTERS.map((s) => html`<option${s === query.state ? ' selected' : ''}>${s}</option>`)}</select>
<select name="sort" aria-label="sort by">${SORTS.flatMap((key) => SORT_LABELS[key].map((label, desc) => {
    const value = `${desc ? '-' : ''}${key}`;
    return html`<option value="${value}"${value === sorted ? ' selected' : ''}>${label}</option>`;
  }))}</select>
<button type="submit">Filter</button>
</form>
<div id="jobs" data-live>
<p class="muted">${failingLink}${counts}</p>
${jobs.length === 0 && selected.length > 0 ? pastEnd : jobs.length === 0 ? html`<p>No jobs ${all.length === 0 ? 'recorded yet: run one with cronguard -n NAME -- command' : 'match'}.</p>` : html`
<table class="jobs">
<thead><tr>${th('Job', 'name')}${th('State', 'state')}${th('Last run', 'last')}${th('Last success', 'success')}${th('OK', 'rate')}<th>Recent</th><th>Median</th><th>Requests</th></tr></thead>
<tbody>${jobs.map((j) => row(j, now))}</tbody>
</table>${pager}`}
</div>`;
}

// The page's title: the failing jobs' count first, so that a browser tab shows it.
export function jobsTitle(all: readonly JobStatus[]): string {
  const failingNow = all.filter(isFailing).length;
  return `${failingNow === 0 ? '' : `(${failingNow} failing) `}Jobs`;
}

function row(j: SlottedJobStatus, now: number): Html {
  const marks = [isFailing(j) ? 'failing' : '', stale(j, now) ? 'stale' : ''].filter(Boolean).join(' ');
  const href = `/jobs/${encodeURIComponent(j.job)}`;
  return html`<tr class="${marks}" data-job="${j.job}">
<td data-label="Job"><a href="${href}">${j.job}</a>${stale(j, now) ? html` <span class="tag stale">stale</span>` : ''}</td>
<td data-label="State">${stateCell(j, now)}</td>
<td data-label="Last run">${j.last_run_id === null ? '-' : html`<a href="/runs/${j.last_run_id}">${statusBadge(j.last_status, j.last_exit_code, j.last_signal)}</a> ${time(j.last_started_at)}`}</td>
<td data-label="Last success" class="${j.last_success_run_id !== null && j.last_success_run_id === j.last_run_id ? 'same' : ''}">${j.last_success_at === null ? html`<span class="${isFailing(j) ? 'bad' : ''}">never</span>` : time(j.last_success_at)}</td>
<td data-label="OK">${percent(j.success_rate)}</td>
<td data-label="Recent">${sparkline(j.recent)}</td>
<td data-label="Median">${duration(j.duration_median_ms)}</td>
<td data-label="Requests" class="${j.pending_requests > 0 ? 'pending' : 'none'}">${j.pending_requests > 0 ? html`<span class="tag">${j.pending_requests} pending</span>` : '0'}</td>
</tr>`;
}

// "2 of 3 running", as a state.
export function slotsState(s: JobSlots): Html {
  return html`<span class="state running">${slotsText(s)}</span>`;
}

export function stateCell(j: SlottedJobStatus, now = Date.now()): Html {
  // Copies in several slots of its lock (--max-running): how many of how many, and a link to
  // each slot's run.
  if (j.state === 'running' && j.slots) {
    const runs = j.slots.running.map((h) => html` <a href="/runs/${h.run_id}" class="slot" title="run ${h.run_id} on ${h.host}, pid ${h.pid}">slot ${h.slot}</a>`);
    return html`${slotsState(j.slots)}${runs}`;
  }
  if (j.state === 'running') {
    return html`<span class="state running">running</span> <a href="/runs/${j.running_run_id}">since ${time(j.running_since)}</a> <span class="muted">(${age(j.running_since, now)})</span>`;
  }
  if (j.state === 'disabled') {
    const fleet = j.disabled_fleet_wide ? html` <span class="muted">fleet-wide</span>` : '';
    return html`<span class="state disabled">paused</span>${fleet}${j.disabled_reason ? html` <span class="reason">${j.disabled_reason}</span>` : ''}`;
  }
  // A loop (--for) between its runs holds the lock; or another job runs under the lock it
  // shares (--lock-file, --lock-key).
  const holding = j.holding === null ? '' : html` <span class="muted">holding its lock (${j.holding.host}, pid ${j.holding.pid}) until ${time(j.holding.until)}</span>`;
  const held = j.lock_held_by === null ? '' : html` <span class="muted">lock held by <a href="/jobs/${encodeURIComponent(j.lock_held_by)}">${j.lock_held_by}</a></span>`;
  return html`<span class="state idle">idle</span>${holding}${held}`;
}
