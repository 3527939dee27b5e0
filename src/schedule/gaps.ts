import { Cron } from 'croner';

// Spring-forward gaps that end at or after local midnight (America/Nuuk on 2026-03-28: 22:59
// jumps to Sunday 00:00). A fixed-time job whose time falls in such a gap runs when the gap
// ends, as Vixie cron does and as PostgreSQL's schedule_due() reads it; croner runs such a
// job at the gap's end only when the gap ends on the same day, and skipped it for the night.
// This adds those fires.

const DAY_MS = 86_400_000;

// One gap: the instant the clocks jump (`at`), and the local day before it with the minute
// of that day at which the missing time begins.
interface Gap {
  readonly at: number;
  readonly day: { readonly y: number; readonly m: number; readonly d: number };
  readonly fromMinute: number;
}

interface Local {
  readonly y: number;
  readonly m: number;
  readonly d: number;
  readonly minute: number;
}

const formats = new Map<string, Intl.DateTimeFormat>();

function local(zone: string, ms: number): Local {
  let format = formats.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
    formats.set(zone, format);
  }
  const parts: Record<string, number> = {};
  for (const p of format.formatToParts(new Date(ms))) if (p.type !== 'literal') parts[p.type] = Number(p.value);
  return { y: parts.year as number, m: parts.month as number, d: parts.day as number, minute: (parts.hour as number) * 60 + (parts.minute as number) + (parts.second as number) / 60 };
}

// The zone's offset from UTC at `ms`, in minutes.
function offset(zone: string, ms: number): number {
  const l = local(zone, ms);
  return Math.round((Date.UTC(l.y, l.m - 1, l.d) + l.minute * 60_000 - Math.floor(ms / 1000) * 1000) / 60_000);
}

const gapsByYear = new Map<string, readonly Gap[]>();

// The zone's midnight-crossing gaps whose jump falls in UTC year `year`, found once per zone
// and year: the offset looked at once a day, and each change narrowed down to the second.
function gapsOf(zone: string, year: number): readonly Gap[] {
  const key = `${zone} ${year}`;
  const known = gapsByYear.get(key);
  if (known) return known;
  const gaps: Gap[] = [];
  const end = Date.UTC(year + 1, 0, 1);
  let from = Date.UTC(year, 0, 1);
  let before = offset(zone, from);
  for (let t = from + DAY_MS; from < end; t += DAY_MS) {
    const after = offset(zone, t);
    if (after > before) {
      let [lo, hi] = [from, t];
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
        if (offset(zone, mid) === before) lo = mid;
        else hi = mid;
      }
      const last = local(zone, hi - 1000);
      const first = local(zone, hi);
      if (first.y !== last.y || first.m !== last.m || first.d !== last.d) gaps.push({ at: hi, day: last, fromMinute: Math.floor(last.minute) + 1 });
    }
    [from, before] = [t, after];
  }
  gapsByYear.set(key, gaps);
  return gaps;
}

// The fires a fixed-time cron expression gains in midnight-crossing gaps, and its times.
export class GapFires {
  private readonly minutes: readonly number[];
  // The same days, at a time every day has: whether a gap's day is one of the job's.
  private readonly days: Cron<unknown>;

  constructor(
    private readonly zone: string,
    fields: readonly string[],
    options: ConstructorParameters<typeof Cron>[1],
  ) {
    const [minute, hour, dom, month, dow] = fields as [string, string, string, string, string];
    const hours = expand(hour);
    this.minutes = hours.flatMap((h) => expand(minute).map((m) => h * 60 + m)).sort((a, b) => a - b);
    this.days = new Cron(`0 12 ${dom} ${month} ${dow}`, options);
  }

  // Whether the expression is one these apply to: fixed times (no * or / in its minute and
  // hour), as croner's fixedTimeRule 'no-wildcard' reads it.
  static applies(fields: readonly string[]): boolean {
    return fields.slice(0, 2).every((f) => !f.includes('*') && !f.includes('/'));
  }

  // The gap fires after `afterMs` up to and including `untilMs`, oldest first.
  between(afterMs: number, untilMs: number): number[] {
    const fires: number[] = [];
    const first = new Date(afterMs).getUTCFullYear();
    const last = new Date(untilMs).getUTCFullYear();
    for (let year = first; year <= last; year++) {
      for (const gap of gapsOf(this.zone, year)) {
        if (gap.at <= afterMs || gap.at > untilMs) continue;
        const latest = this.minutes.at(-1);
        if (latest === undefined || latest < gap.fromMinute) continue;
        const noon = Date.UTC(gap.day.y, gap.day.m - 1, gap.day.d, 12) - offset(this.zone, gap.at - 1000) * 60_000;
        if (this.days.match(new Date(noon))) fires.push(gap.at);
      }
    }
    return fires;
  }
}

// The values of a minute or hour field of fixed times: numbers, ranges and lists of them.
function expand(field: string): number[] {
  return field.split(',').flatMap((item) => {
    const [lo, hi] = item.split('-').map(Number) as [number, number | undefined];
    return Array.from({ length: (hi ?? lo) - lo + 1 }, (_, i) => lo + i);
  });
}

// A cron expression's fire times: croner's, and for fixed times the gap fires it misses.
export class CronFires {
  constructor(
    private readonly cron: Cron,
    private readonly gaps: GapFires | null,
  ) {}

  // The first fire after `after` (now when not given); null when it never fires again.
  nextRun(after: Date = new Date()): Date | null {
    const next = this.cron.nextRun(after);
    if (this.gaps === null) return next;
    const extra = this.gaps.between(after.getTime(), next?.getTime() ?? after.getTime() + 366 * DAY_MS)[0];
    return extra === undefined ? next : new Date(extra);
  }

  // The latest `count` fires before `before`, newest first.
  previousRuns(count: number, before: Date): Date[] {
    const runs = this.cron.previousRuns(count, before);
    if (this.gaps === null) return runs;
    const oldest = runs.at(-1)?.getTime() ?? before.getTime() - 366 * DAY_MS;
    const extra = this.gaps.between(oldest, before.getTime() - 1).map((at) => new Date(at));
    return [...runs, ...extra].sort((a, b) => b.getTime() - a.getTime()).slice(0, count);
  }
}
