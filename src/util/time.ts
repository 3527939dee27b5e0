import { UsageError } from '../errors.js';
import { parseDuration } from './duration.js';

// What a time that must be to come (--until) is told when it is not.
export const PAST_HINT = 'give a time to come (+2h, 03:00, an ISO time)';

// When a request may run, as `request --at` takes it: `now`; `+DURATION` (or `in DURATION`);
// a local time of day, `HH:MM[:SS]`, at its next occurrence (optionally `today` or
// `tomorrow` before it); or a date and time, `YYYY-MM-DD[ T]HH:MM[:SS]`, local unless it ends
// in Z or an offset. A time in the past is refused: only `now` means now. `option` names
// the flag in messages (`disable --until` takes the same forms).
export function parseAt(text: string, now: Date = new Date(), option = '--at'): Date {
  const bad = () =>
    new UsageError(`${option}: '${text}' is not a time (use now, +10m, 03:00, tomorrow 03:00, 2026-12-01 03:00 or an ISO time)`);
  const t = text.trim();
  if (t === 'now') return now;
  const relative = /^(?:\+|in\s+)(.+)$/.exec(t);
  if (relative) return new Date(now.getTime() + parseDuration(relative[1] as string, option));
  const at = pointInTime(t, now, 'next', bad);
  if (at.getTime() < now.getTime() - 1000) {
    throw new UsageError(`${option}: ${text} is in the past; ${option === '--at' ? '--at now runs it at once' : PAST_HINT}`);
  }
  return at;
}

// Where a listing starts, as `history --since` takes it: a DURATION ago (`2h`, `1d`), a
// local time of day at its last occurrence (`03:00`, `yesterday 03:00`), a date
// (`2026-11-30`, local midnight) or a date and time as for --at.
export function parseSince(text: string, option: string, now: Date = new Date()): Date {
  const bad = () =>
    new UsageError(`${option}: '${text}' is neither a duration nor a time (use e.g. 2h, 1d, 03:00, yesterday 03:00, 2026-11-30)`);
  const t = text.trim();
  if (/^\d/.test(t) && !/[-:]/.test(t)) return new Date(now.getTime() - parseDuration(t, option));
  const date = /^(\d{4})-(\d{2})-(\d{2})$/.exec(t);
  return pointInTime(date ? `${t} 00:00` : t, now, 'last', bad);
}

// A time of day (its next or last occurrence, or on the day named) or a date and time.
function pointInTime(t: string, now: Date, direction: 'next' | 'last', bad: () => UsageError): Date {
  const clock = /^(?:(today|tomorrow|yesterday)\s+)?(\d{1,2}):(\d{2})(?::(\d{2}))?$/.exec(t);
  if (clock) {
    const [, day, h, m, s] = clock;
    if (Number(h) > 23 || Number(m) > 59 || Number(s ?? 0) > 59) throw bad();
    if (day === (direction === 'next' ? 'yesterday' : 'tomorrow')) throw bad();
    const at = new Date(now);
    at.setHours(Number(h), Number(m), Number(s ?? 0), 0);
    if (day === 'tomorrow' || (day === undefined && direction === 'next' && at <= now)) at.setDate(at.getDate() + 1);
    if (day === 'yesterday' || (day === undefined && direction === 'last' && at > now)) at.setDate(at.getDate() - 1);
    return at;
  }
  const full = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(t);
  if (!full) throw bad();
  const [, y, mo, d, h, mi, s, frac, zone] = full;
  const at = zone
    ? new Date(`${y}-${mo}-${d}T${h}:${mi}:${s ?? '00'}${frac ?? ''}${zone.length === 5 ? `${zone.slice(0, 3)}:${zone.slice(3)}` : zone}`)
    : new Date(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s ?? 0), Math.round(Number(frac ?? 0) * 1000));
  // Date rolls 2026-02-31 over into March: such a date does not exist.
  if (Number.isNaN(at.getTime()) || (!zone && at.getDate() !== Number(d))) throw bad();
  return at;
}

const two = (n: number) => String(n).padStart(2, '0');

// A moment as this host's wall clock shows it (TZ honoured), to the second: 2026-05-01 03:00:01.
export function wallClock(at: Date): string {
  return `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())} ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())}`;
}

// The same with its offset from UTC, as a person reading a terminal wants it:
// 2026-05-01 03:00:01 +02:00.
export function localTime(iso: string): string {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  const offset = -at.getTimezoneOffset();
  return `${wallClock(at)} ${offset < 0 ? '-' : '+'}${two(Math.floor(Math.abs(offset) / 60))}:${two(Math.abs(offset) % 60)}`;
}

// Milliseconds on a monotonic clock, for durations. (The global `performance` would load
// perf_hooks, half a millisecond of every start.)
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
