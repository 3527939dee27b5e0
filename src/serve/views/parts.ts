import { html } from 'hono/html';
import { age, duration, percent } from '../../present/format.js';
import type { RecentRun } from '../../store/jobs.js';
import type { Html } from './layout.js';

// The terminal's own formatters (commands/format.ts needs chalk's types only).
export { age, duration, percent };

// Small pieces the pages share: times, durations, statuses, the sparkline.

// A time as UTC text the script turns into the browser's own zone (and a page without
// script still shows a correct, labelled time).
export function time(iso: string | null): Html | string {
  if (iso === null) return '-';
  const shown = `${iso.slice(0, 19).replace('T', ' ')} UTC`;
  return html`<time datetime="${iso}">${shown}</time>`;
}

export function statusBadge(status: string | null, exit?: number | null, signal?: string | null): Html | string {
  if (status === null) return '-';
  const code = exit !== null && exit !== undefined && (status !== 'succeeded' || exit !== 0) ? ` ${exit}` : signal ? ` ${signal}` : '';
  return html`<span class="status s-${status}">${status.replace('_', ' ')}${code}</span>`;
}

const BAR = 6;
const GAP = 2;
const HEIGHT = 24;

// The latest runs, oldest first, as an inline SVG: a bar per run, its height the duration
// (shortest to longest shown, as the CLI's sparkline), a run that did not succeed a full
// red bar. Two paths rather than an element per bar: the jobs page draws a thousand of them.
// On a narrow screen it narrows (the stylesheet caps its width) and keeps its height.
export function sparkline(recent: readonly RecentRun[], count = 20): Html | string {
  const shown = recent.slice(-count);
  if (shown.length === 0) return '';
  const ok = shown.filter((r) => r.status === 'succeeded').map((r) => r.duration_ms ?? 0);
  const [low, high] = [Math.min(...ok), Math.max(...ok)];
  let good = '';
  let bad = '';
  shown.forEach((r, i) => {
    const failed = r.status !== 'succeeded';
    const share = failed ? 1 : high === low ? 0.5 : ((r.duration_ms ?? 0) - low) / (high - low);
    const h = Math.max(3, Math.round(share * (HEIGHT - 2)) + 2);
    const bar = `M${i * (BAR + GAP)} ${HEIGHT}v-${h}h${BAR}v${h}z`;
    if (failed) bad += bar;
    else good += bar;
  });
  const failures = shown.length - ok.length;
  const last = shown.at(-1) as RecentRun;
  const summary = `last ${shown.length} runs: ${failures} not succeeded; latest ${last.status} in ${duration(last.duration_ms)}`;
  const width = shown.length * (BAR + GAP);
  return html`<svg class="spark" width="${width}" height="${HEIGHT}" viewBox="0 0 ${width} ${HEIGHT}" preserveAspectRatio="none" role="img" aria-label="${summary}"><title>${summary}</title>${good ? html`<path class="bar-ok" d="${good}"/>` : ''}${bad ? html`<path class="bar-fail" d="${bad}"/>` : ''}</svg>`;
}
