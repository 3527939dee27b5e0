import { describe, expect, it } from 'vitest';
import { scheduleDue } from '../../src/schedule/due.js';
import { parseSchedule } from '../../src/schedule/spec.js';
import { cronguard } from '../helpers.js';
import { pgSandbox, sql } from '../pg-helpers.js';

// PostgreSQL's admission reads a stored schedule in SQL (migration 0018); SQLite and MySQL
// read it with croner (schedule/due.ts). The same job must be due, or not, whichever store
// it logs to: the two are asked the same questions, around DST changes, month ends, leap
// days and cron's jitter, and must agree on every answer.
const SCHEDULES = [
  'every 2s',
  'every 1h30m',
  'every 1d',
  '* * * * *',
  '*/5 * * * *',
  '0 * * * *',
  '30 2 * * *',
  'TZ=Europe/Warsaw 30 2 * * *',
  'TZ=Europe/Warsaw */15 2 * * *',
  'TZ=Europe/Warsaw 0 3 * * *',
  'TZ=America/New_York 0 9 * * 1-5',
  'TZ=America/New_York 30 1 * * *',
  'TZ=Australia/Lord_Howe 15 2 * * *',
  'TZ=Asia/Kolkata 0 0 1 * *',
  '0 0 29 2 *',
  '0 12 1,15 * mon',
  '0 12 */2 * mon',
  '15 10 * jan-jun/2 sun,7',
  '5-50/15 0-6,22,23 * * *',
  '0 0 31 * *',
  // Names PostgreSQL also has as abbreviations of a fixed offset; as zones they have summer time.
  'TZ=CET 0 3 * * *',
  'TZ=EET 30 2 * * *',
  'TZ=WET */20 1 * * *',
];

// Times: near the 2026 DST changes of the zones above, at and around whole minutes (where
// the slack for cron's jitter decides), and spread over the year.
function times(): number[] {
  const around = ['2026-07-01T01:00:00Z', '2026-03-29T01:00:00Z', '2026-10-25T01:00:00Z', '2026-03-08T07:00:00Z', '2026-11-01T06:00:00Z', '2026-04-04T15:00:00Z', '2026-10-03T15:30:00Z', '2028-02-29T00:00:00Z', '2026-12-31T23:59:00Z'];
  const out: number[] = [];
  for (const t of around) for (const d of [-3600e3, -1830e3, -61e3, -30e3, -1e3, 0, 1e3, 29e3, 31e3, 1799e3, 3600e3, 5400e3]) out.push(Date.parse(t) + d);
  let seed = 20261203;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  for (let i = 0; i < 40; i++) out.push(Date.parse('2026-01-01T00:00:00Z') + Math.floor(random() * 366 * 86400) * 1000);
  return out;
}

// Last starts: never, just before, around the latest fire, a day and a month before.
const LAST = [null, -1e3, -20e3, -59e3, -61e3, -3599e3, -86400e3, -30 * 86400e3];

describe('a stored schedule read by PostgreSQL and by croner', () => {
  // One statement of 54,464 plpgsql calls: past the suite's 300 s on a 2-core machine under
  // full load (seen), so a bound of its own.
  it('is due, or not, for both alike', async () => {
    const box = pgSandbox();
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    const cases: { spec: string; last: number | null; now: number; early: boolean }[] = [];
    for (const spec of SCHEDULES) for (const now of times()) for (const d of LAST) for (const early of [true, false]) cases.push({ spec, now, early, last: d === null ? null : now + d });
    const rows = await sql<{ due: boolean | null }>(
      `SELECT ("${box.schema}".schedule_due(s, $5, l, n, e)->>'due')::boolean AS due
       FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::boolean[]) WITH ORDINALITY AS c(s, l, n, e, i) ORDER BY i`,
      [cases.map((c) => c.spec), cases.map((c) => (c.last === null ? null : new Date(c.last).toISOString())), cases.map((c) => new Date(c.now).toISOString()), cases.map((c) => c.early), zone],
    );
    const differ = cases.flatMap((c, i) => {
      const js = scheduleDue(parseSchedule(c.spec), c.last, c.now, c.early).due;
      const db = rows[i]?.due;
      return js === db ? [] : [`${c.spec} at ${new Date(c.now).toISOString()}, last ${c.last === null ? 'never' : new Date(c.last).toISOString()}${c.early ? '' : ' (in a loop)'}: croner ${js}, SQL ${db}`];
    });
    expect(differ.slice(0, 20)).toEqual([]);
    // Both answers occur: the cases ask something.
    expect(new Set(rows.map((r) => r.due))).toEqual(new Set([true, false]));
  }, 900_000);

  // Every clock change of 2026 and 2027 in every zone the runtime knows, as the fuzz that
  // found SQLite and MySQL skipping a night that PostgreSQL ran (issue 35, item 15: a gap that
  // ends at midnight, America/Nuuk): fixed times in and around each change, at midnight,
  // weekly, and a stepped hour, asked just before, at, after and a day after the change.
  it('is due, or not, for both alike around every clock change of every zone in 2026-2027', async () => {
    const box = pgSandbox();
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const cases: { spec: string; last: number | null; now: number; early: boolean }[] = [];
    // Only the changes that the runtime's zone data and the server's agree on: the two come
    // from tzdata releases of their own (the embedded server's, Node's ICU), and a rule that
    // changed between them is a difference of data, not of reading.
    const changes = clockChanges(Date.UTC(2026, 0, 1), Date.UTC(2028, 0, 1));
    const seen = await sql<{ b: string; a: string }>(
      `SELECT to_char((t - interval '1 second') AT TIME ZONE z, 'HH24:MI') AS b, to_char(t AT TIME ZONE z, 'HH24:MI') AS a
       FROM unnest($1::text[], $2::timestamptz[]) WITH ORDINALITY AS c(z, t, i) ORDER BY i`,
      [changes.map((c) => c.zone), changes.map((c) => new Date(c.at).toISOString())],
    );
    const clock = (minute: number) => `${String(Math.floor(minute / 60)).padStart(2, '0')}:${String(minute % 60).padStart(2, '0')}`;
    const agreed = changes.filter((c, i) => seen[i]?.b === clock(c.before.minute) && seen[i]?.a === clock(c.after.minute));
    // Nearly all of them (a release or two apart, a handful of zones at most).
    expect(agreed.length).toBeGreaterThan(changes.length * 0.9);
    for (const { zone, at, before, after } of agreed) {
      const hm = (minute: number) => `${minute % 60} ${Math.floor(minute / 60) % 24}`;
      // The first local minute the change skips or repeats, the last one before it, midnight.
      const specs = [`${hm(before.minute + 1)} * * *`, `${hm(before.minute)} * * *`, '0 0 * * *', `${hm(after.minute)} * * ${after.weekday}`, `*/30 ${Math.floor((before.minute + 1) / 60) % 24} * * *`];
      for (const spec of specs) {
        for (const now of [at - 60e3, at + 30e3, at + 3600e3, at + 86400e3]) {
          for (const last of [null, at - 86400e3]) for (const early of [true, false]) cases.push({ spec: `TZ=${zone} ${spec}`, last, now, early });
        }
      }
    }
    const rows = await sql<{ due: boolean | null }>(
      `SELECT ("${box.schema}".schedule_due(s, 'UTC', l, n, e)->>'due')::boolean AS due
       FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::boolean[]) WITH ORDINALITY AS c(s, l, n, e, i) ORDER BY i`,
      [cases.map((c) => c.spec), cases.map((c) => (c.last === null ? null : new Date(c.last).toISOString())), cases.map((c) => new Date(c.now).toISOString()), cases.map((c) => c.early)],
    );
    const differ = cases.flatMap((c, i) => {
      const js = scheduleDue(parseSchedule(c.spec), c.last, c.now, c.early).due;
      const db = rows[i]?.due;
      return js === db ? [] : [`${c.spec} at ${new Date(c.now).toISOString()}, last ${c.last === null ? 'never' : new Date(c.last).toISOString()}${c.early ? '' : ' (in a loop)'}: croner ${js}, SQL ${db}`];
    });
    expect(differ.slice(0, 20)).toEqual([]);
    expect(cases.length).toBeGreaterThan(10_000);
  }, 900_000);

  it('says why it cannot read one that an UPDATE by hand let through', async () => {
    const box = pgSandbox();
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const ask = async (spec: string) => (await sql<{ v: unknown }>(`SELECT "${box.schema}".schedule_due($1, 'UTC', NULL, now()) AS v`, [spec]))[0]?.v;
    expect(await ask('61 * * * *')).toEqual({ problem: "its stored schedule: '61 * * * *' is not valid: minute 61 is outside 0-59" });
    expect(await ask('TZ=Mars/Olympus 0 3 * * *')).toEqual({ problem: "its stored schedule: unknown time zone 'Mars/Olympus'" });
    expect(await ask('0 0 31 2 *')).toEqual({ problem: "its stored schedule: '0 0 31 2 *' never fires" });
    const [host] = await sql<{ v: unknown }>(`SELECT "${box.schema}".schedule_due('* * * * *', 'Etc/Unknown', NULL, now()) AS v`);
    expect(host?.v).toEqual({ problem: 'this host\'s time zone, Etc/Unknown, is unknown to PostgreSQL: give the schedule one (TZ=ZONE)' });
  });
});

interface LocalTime {
  readonly minute: number;
  readonly weekday: number;
}

// Each change of a zone's UTC offset between `from` and `to`: the instant, and the local time
// of day (and weekday) just before and just after it. The offset is looked at once a day, and
// each change narrowed down to the second.
function clockChanges(from: number, to: number): { zone: string; at: number; before: LocalTime; after: LocalTime }[] {
  const changes: { zone: string; at: number; before: LocalTime; after: LocalTime }[] = [];
  for (const zone of Intl.supportedValuesOf('timeZone')) {
    const format = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', weekday: 'short', hour: 'numeric', minute: 'numeric', timeZoneName: 'longOffset' });
    const parts = (ms: number) => Object.fromEntries(format.formatToParts(new Date(ms)).map((p) => [p.type, p.value]));
    const offsetOf = (ms: number) => parts(ms).timeZoneName;
    const local = (ms: number): LocalTime => {
      const p = parts(ms);
      return { minute: Number(p.hour) * 60 + Number(p.minute), weekday: ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'].indexOf(p.weekday as string) };
    };
    for (let t = from; t < to; t += 86400e3) {
      if (offsetOf(t) === offsetOf(t + 86400e3)) continue;
      let [lo, hi] = [t, t + 86400e3];
      while (hi - lo > 1000) {
        const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
        if (offsetOf(mid) === offsetOf(lo)) lo = mid;
        else hi = mid;
      }
      changes.push({ zone, at: hi, before: local(hi - 1000), after: local(hi) });
    }
  }
  return changes;
}

