import { readlinkSync } from 'node:fs';
import { Cron } from 'croner';
import { UsageError } from '../errors.js';
import { parseDuration } from '../util/duration.js';
import { printable } from '../util/printable.js';
import { CronFires, GapFires } from './gaps.js';

// A job's stored schedule (`cronguard schedule`): a period, or a 5-field cron expression
// read in a time zone (the host's when none is given). `text` is its canonical spelling,
// the one the run log stores and every reader shows.
export type Schedule =
  | { readonly kind: 'every'; readonly everyMs: number; readonly text: string }
  | { readonly kind: 'cron'; readonly expr: string; readonly tz: string | null; readonly text: string; readonly cron: CronFires };

// cron's own shorthands, as Vixie cron spells them out.
const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

// One item of a field: `*`, a value or a range of values (numbers or 3-letter names), with
// an optional step. Portable cron only: Quartz's L, W, # and ? are refused, so that a
// schedule means the same in every reader of the log, PostgreSQL's set_schedule() included
// (migration 0017, which checks fields with the same rules and words).
const ITEM = /^(\*|[0-9]+|[a-z]{3})(?:-([0-9]+|[a-z]{3}))?(?:\/([0-9]+))?$/;
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const FIELDS: readonly { what: string; lo: number; hi: number; names?: string[] }[] = [
  { what: 'minute', lo: 0, hi: 59 },
  { what: 'hour', lo: 0, hi: 23 },
  { what: 'day', lo: 1, hi: 31 },
  { what: 'month', lo: 1, hi: 12, names: MONTHS },
  { what: 'weekday', lo: 0, hi: 7, names: WEEKDAYS },
];

// Why a field is not one cronguard reads; null when it is.
function fieldProblem(field: string, { what, lo, hi, names }: (typeof FIELDS)[number]): string | null {
  for (const item of field.split(',')) {
    const m = ITEM.exec(item.toLowerCase());
    if (m === null || (m[1] === '*' && m[2] !== undefined)) return `has a field cronguard does not read, '${field}'`;
    if (m[3] !== undefined && Number(m[3]) < 1) return `is not valid: a step of ${m[3]}`;
    if (m[3] !== undefined && (m[3].length > 4 || Number(m[3]) > hi)) return `is not valid: a step of ${m[3]} is more than ${hi}`;
    if (m[3] !== undefined && m[1] !== '*' && m[2] === undefined) return `is not valid: a step needs a range or * before it (${m[1]}-${hi}/${m[3]}, not ${item})`;
    const bounds: number[] = [];
    for (const value of [m[1], m[2]]) {
      if (value === undefined || value === '*') continue;
      // Past four digits a value is out of range whatever its leading zeros, as in SQL.
      const v = /^[0-9]{1,4}$/.test(value) ? Number(value) : names?.includes(value) ? names.indexOf(value) + lo : Number.NaN;
      if (!(v >= lo && v <= hi)) return `is not valid: ${what} ${value} is outside ${lo}-${hi}`;
      bounds.push(v);
    }
    if (bounds.length === 2 && (bounds[0] as number) > (bounds[1] as number)) return `is not valid: ${what} range ${m[1]}-${m[2]} runs backwards`;
  }
  return null;
}

const MAX_TEXT = 200;

// Parses a schedule as `cronguard schedule`, the SQL function and the web page take it:
// `every DURATION`, or `[TZ=ZONE ]MIN HOUR DOM MON DOW` (or @daily and its kin). A mistake
// is a UsageError (64) that says what is wrong and how it is spelled right.
// `label` names what was given, in the error: the flag, or the stored schedule.
export function parseSchedule(input: string, label = 'schedule'): Schedule {
  const text = spaced(input);
  if (text === '') throw new UsageError(`${label}: empty (use e.g. "every 15m", "0 3 * * 1-5" or "TZ=Europe/Warsaw 0 3 * * *")`);
  if (text.length > MAX_TEXT) throw new UsageError(`${label}: at most ${MAX_TEXT} characters`);
  const every = /^every (.+)$/i.exec(text);
  if (every) return everySchedule(every[1] as string, `${label}: every`);
  const zoned = /^(?:CRON_)?TZ=(\S+) (.*)$/.exec(text);
  return cronSchedule(zoned ? (zoned[2] as string) : text, zoned ? validZone(zoned[1] as string, label) : null, label);
}

export function everySchedule(duration: string, label = 'every'): Schedule {
  let everyMs: number;
  try {
    everyMs = parseDuration(duration, label);
  } catch (error) {
    // One line, whatever the input held.
    throw new UsageError(printable((error as Error).message));
  }
  if (everyMs < 1000) throw new UsageError(`${label}: ${printable(duration)} is shorter than 1s`);
  return { kind: 'every', everyMs, text: `every ${duration}` };
}

export function cronSchedule(expression: string, tz: string | null, label = 'schedule'): Schedule {
  const trimmed = spaced(expression);
  const expr = Object.hasOwn(MACROS, trimmed.toLowerCase()) ? (MACROS[trimmed.toLowerCase()] as string) : trimmed;
  const fields = expr.split(' ');
  const bad = (why: string) => new UsageError(`${label}: '${printable(trimmed)}' ${printable(why)} (five fields: minute hour day-of-month month day-of-week, e.g. "0 3 * * 1-5")`);
  if (fields.length !== 5) throw bad(`has ${fields.length} field${fields.length === 1 ? '' : 's'}`);
  const problem = fields.map((f, i) => fieldProblem(f, FIELDS[i] as (typeof FIELDS)[number])).find((p) => p !== null);
  if (problem) throw bad(problem);
  let cron: CronFires;
  try {
    // Vixie cron's rule: day of month OR day of week when both are restricted; AND when either
    // starts with `*` (so `*/2` and `mon` is Mondays on odd days, as crontab(5) has it).
    const domAndDow = (fields[2] as string).startsWith('*') || (fields[4] as string).startsWith('*');
    // Across DST changes, as Vixie cron: a job at a fixed time (no * or / in its minute and
    // hour) runs once when its time comes twice, and at the change when its time is skipped;
    // the others run at every local time that comes, twice or not at all.
    // croner keeps the last rule only for a gap that ends on the job's day; GapFires adds those
    // that end past midnight.
    const options = { mode: '5-part', paused: true, domAndDow, fixedTimeRule: 'no-wildcard', timezone: tz ?? hostZone() } as const;
    cron = new CronFires(new Cron(expr, options), GapFires.applies(fields) ? new GapFires(tz ?? hostZone(), fields, options) : null);
  } catch (error) {
    throw bad(`is not valid: ${String((error as Error).message).replace(/^CronPattern: /, '')}`);
  }
  // 31 February and its kin: a schedule that is never due would read as a job that waits.
  if (cron.nextRun(new Date()) === null) throw bad('never fires');
  return { kind: 'cron', expr, tz, text: tz === null ? expr : `TZ=${tz} ${expr}`, cron };
}

// The zone a schedule without TZ= is read in: the host's, by name, so that every reader of
// it (PostgreSQL's admit() too) reads it alike. TZ empty is UTC, as for the C library; a
// TZ or /etc/localtime that Intl cannot name is named by its path under zoneinfo; else UTC.
let host: string | null = null;
export function hostZone(): string {
  host ??= namedZone() ?? zoneFromPath(process.env.TZ === undefined ? linkOf('/etc/localtime') : process.env.TZ) ?? 'UTC';
  return host;
}

function namedZone(): string | null {
  const name = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return name && name !== 'Etc/Unknown' ? name : null;
}

function zoneFromPath(path: string): string | null {
  const zone = /zoneinfo\/(.+)$/.exec(path.replace(/^:/, ''))?.[1];
  if (zone === undefined) return null;
  try {
    return validZone(zone);
  } catch {
    return null;
  }
}

function linkOf(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '';
  }
}

// An IANA zone name the runtime knows; the error lists how one is spelled.
export function validZone(zone: string, label = 'schedule'): string {
  try {
    // A name: not an offset (+03:00), which newer Node reads and older Node and PostgreSQL do not.
    if (!/^[A-Za-z]/.test(zone)) throw new RangeError(zone);
    // Kept as given: set_schedule() keeps it so too, as no reader knows another's aliases.
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return zone;
  } catch {
    throw new UsageError(`${label}: unknown time zone '${printable(zone)}' (an IANA name, e.g. Europe/Warsaw, America/New_York or UTC)`);
  }
}

// Blanks as cron reads them: spaces and tabs between fields, line ends around them; any
// other character (a no-break space) is part of a field, and refused there. As set_schedule().
function spaced(text: string): string {
  return text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '').replace(/[ \t\r\n]+/g, ' ');
}
