import type { ChalkInstance } from 'chalk';
import type { RecentRun } from '../store/jobs.js';
import { formatDuration } from '../util/duration.js';
import { wallClock } from '../util/time.js';

// How the human output shows times and runs: local time (TZ honoured), ages, sparklines.

// A time in the local zone, to the second, for tables (their header names the zone).
export function tableTime(iso: string | null): string {
  return iso === null ? '-' : wallClock(new Date(iso));
}

// The local time of day, HH:MM:SS, for a time within the day ("holding until 14:03:00").
export function clockTime(iso: string): string {
  return wallClock(new Date(iso)).slice(-8);
}

// The local zone's short name (CET, UTC, GMT+5:30), for a column header.
export function zoneName(at: Date = new Date()): string {
  const part = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short' }).formatToParts(at).find((p) => p.type === 'timeZoneName');
  return part?.value ?? 'local';
}

// How long ago (or, for a future time, how long until): 3h12m ago, in 4m05s.
export function ago(iso: string | null, now: number = Date.now()): string {
  if (iso === null) return '-';
  const ms = now - Date.parse(iso);
  if (Math.abs(ms) < 1000) return 'now';
  return ms > 0 ? `${formatDuration(ms)} ago` : `in ${formatDuration(-ms)}`;
}

// The same, without the words, for narrow columns.
export function age(iso: string | null, now: number = Date.now()): string {
  return iso === null ? '-' : formatDuration(Math.max(0, now - Date.parse(iso)));
}

// Whether the terminal takes UTF-8, going by the locale as terminal programs do.
function utf8(env: NodeJS.ProcessEnv): boolean {
  return /utf-?8/i.test(env.LC_ALL || env.LC_CTYPE || env.LANG || '');
}

// The latest `width` runs as one character each, oldest first: the bar's height is the
// duration, a run that did not succeed is a red cross, so a
// change in how long a job takes or a run of failures shows at a glance. Without UTF-8
// (cron, `su -`, the C locale) four heights in plain ASCII that still read as bars rising
// from the line (`_.:|`), rather than symbols whose order no one can guess.
export function sparkline(recent: readonly RecentRun[], width: number, c: ChalkInstance, env: NodeJS.ProcessEnv = process.env): string {
  const bars = utf8(env) ? '▁▂▃▄▅▆▇█' : '_.:|';
  const fail = utf8(env) ? '×' : 'x';
  const shown = recent.slice(-width);
  const durations = shown.filter((r) => r.status === 'succeeded').map((r) => r.duration_ms ?? 0);
  const [low, high] = [Math.min(...durations), Math.max(...durations)];
  return shown
    .map((r) => {
      if (r.status !== 'succeeded') return c.red(fail);
      // From the shortest shown to the longest, as spark(1) does: a change stands out.
      const share = high === low ? 0.5 : ((r.duration_ms ?? 0) - low) / (high - low);
      return c.green(bars[Math.min(bars.length - 1, Math.floor(share * bars.length))] as string);
    })
    .join('');
}

// A rate as a whole percentage (99.5% is not 100%).
export function percent(rate: number | null): string {
  if (rate === null) return '-';
  const p = rate * 100;
  return `${p > 99 && p < 100 ? 99 : Math.round(p)}%`;
}

export function duration(ms: number | null): string {
  return ms === null ? '-' : formatDuration(ms);
}

// The width to fit: COLUMNS when set (as ls and ps take it, on a terminal or not), else
// the terminal's; piped without COLUMNS, no limit: nothing is dropped or cut (for grep).
export function terminalWidth(env: NodeJS.ProcessEnv = process.env): number {
  const columns = Number(env.COLUMNS);
  if (Number.isInteger(columns) && columns > 0) return columns;
  return process.stdout.isTTY && process.stdout.columns ? process.stdout.columns : Number.POSITIVE_INFINITY;
}

// Shortens text to `max` display characters with an ellipsis.
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  return max <= 1 ? text.slice(0, max) : `${text.slice(0, max - 1)}…`;
}

export { printable } from '../util/printable.js';
