import { UsageError } from '../errors.js';
import { parseDuration } from './duration.js';

// When a request may run, as `request --at` takes it: `now`; `+DURATION` (or `in DURATION`);
// a local time of day, `HH:MM[:SS]`, at its next occurrence (optionally `today` or
// `tomorrow` before it); or a date and time, `YYYY-MM-DD[ T]HH:MM[:SS]`, local unless it ends
// in Z or an offset. A time in the past is refused: only `now` means now.
export function parseAt(text: string, now: Date = new Date()): Date {
  const bad = () =>
    new UsageError(`--at: '${text}' is not a time (use now, +10m, 03:00, tomorrow 03:00, 2026-12-01 03:00 or an ISO time)`);
  const t = text.trim();
  if (t === 'now') return now;
  const relative = /^(?:\+|in\s+)(.+)$/.exec(t);
  if (relative) return new Date(now.getTime() + parseDuration(relative[1] as string, '--at'));
  let at: Date;
  const clock = /^(?:(today|tomorrow)\s+)?(\d{1,2}):(\d{2})(?::(\d{2}))?$/.exec(t);
  if (clock) {
    const [, day, h, m, s] = clock;
    at = new Date(now);
    at.setHours(Number(h), Number(m), Number(s ?? 0), 0);
    if (day === 'tomorrow' || (day === undefined && at <= now)) at.setDate(at.getDate() + 1);
    if (Number(h) > 23 || Number(m) > 59 || Number(s ?? 0) > 59) throw bad();
  } else {
    const full = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(t);
    if (!full) throw bad();
    const [, y, mo, d, h, mi, s, frac, zone] = full;
    at = zone
      ? new Date(`${y}-${mo}-${d}T${h}:${mi}:${s ?? '00'}${frac ?? ''}${zone.length === 5 ? `${zone.slice(0, 3)}:${zone.slice(3)}` : zone}`)
      : new Date(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s ?? 0), Math.round(Number(frac ?? 0) * 1000));
    // Date rolls 2026-02-31 over into March: such a date does not exist.
    if (Number.isNaN(at.getTime()) || (!zone && at.getDate() !== Number(d))) throw bad();
  }
  if (at.getTime() < now.getTime() - 1000) {
    throw new UsageError(`--at: ${text} is in the past; --at now runs it at once`);
  }
  return at;
}

// A moment as this host's wall-clock time (TZ honoured) with its offset from UTC, as a
// person reading a terminal wants it: 2026-05-01 03:00:01 +02:00.
export function localTime(iso: string): string {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return iso;
  const two = (n: number) => String(n).padStart(2, '0');
  const offset = -at.getTimezoneOffset();
  const zone = `${offset < 0 ? '-' : '+'}${two(Math.floor(Math.abs(offset) / 60))}:${two(Math.abs(offset) % 60)}`;
  const date = `${at.getFullYear()}-${two(at.getMonth() + 1)}-${two(at.getDate())}`;
  return `${date} ${two(at.getHours())}:${two(at.getMinutes())}:${two(at.getSeconds())} ${zone}`;
}
