import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { scheduleDue } from '../../src/schedule/due.js';
import { parseSchedule } from '../../src/schedule/spec.js';

const at = (iso: string) => Date.parse(iso);

describe('a schedule as it is written', () => {
  it.each([
    ['every 15m', 'every 15m'],
    ['  every   2s ', 'every 2s'],
    ['0 3 * * 1-5', '0 3 * * 1-5'],
    ['0  3 * *   MON-FRI', '0 3 * * MON-FRI'],
    ['TZ=Europe/Warsaw 0 3 * * *', 'TZ=Europe/Warsaw 0 3 * * *'],
    ['CRON_TZ=europe/warsaw 0 3 * * *', 'TZ=europe/warsaw 0 3 * * *'],
    ['\t0 3 * * *\r\n', '0 3 * * *'],
    ['@daily', '0 0 * * *'],
    ['TZ=UTC @hourly', 'TZ=UTC 0 * * * *'],
    ['*/5 0-6,22,23 1,15 jan-jun/2 0,7', '*/5 0-6,22,23 1,15 jan-jun/2 0,7'],
  ])('%j is stored as %j', (input, text) => {
    expect(parseSchedule(input).text).toBe(text);
  });

  it.each([
    ['', /empty/],
    ['every', /has 1 field/],
    ['every soon', /schedule: every: invalid duration 'soon'/],
    ['every 500ms', /shorter than 1s/],
    ['constructor', /'constructor' has 1 field/],
    ['0 0 * 1-12/13 *', /a step of 13 is more than 12/],
    ['0 0 * * */99999999999', /a step of 99999999999 is more than 7/],
    ['00007 0 * * *', /minute 00007 is outside 0-59/],
    ['0 3 * *', /'0 3 \* \*' has 4 fields/],
    ['0 3 * * * *', /has 6 fields/],
    ['61 * * * *', /'61 \* \* \* \*' is not valid: minute 61 is outside 0-59 \(five fields: minute hour/],
    ['0 24 * * *', /hour 24 is outside 0-23/],
    ['0 0 0 * *', /day 0 is outside 1-31/],
    ['0 0 * 13 *', /month 13 is outside 1-12/],
    ['0 0 * foo *', /month foo is outside 1-12/],
    ['0 0 * * 8', /weekday 8 is outside 0-7/],
    ['0 5-3 * * *', /hour range 5-3 runs backwards/],
    ['0 0 * feb-jan *', /month range feb-jan runs backwards/],
    ['*/0 * * * *', /a step of 0/],
    ['*-5 * * * *', /does not read, '\*-5'/],
    ['5/10 * * * *', /a step needs a range or \* before it \(5-59\/10, not 5\/10\)/],
    ['0 0 L * *', /a field cronguard does not read, 'L'/],
    ['0 0 * * 5#2', /does not read, '5#2'/],
    ['0 0 ? * *', /does not read, '\?'/],
    ['0 0 31 2 *', /never fires/],
    ['TZ=Mars/Olympus 0 3 * * *', /unknown time zone 'Mars\/Olympus' \(an IANA name/],
    ['x'.repeat(201), /at most 200 characters/],
  ])('%j is refused: %s', (input, message) => {
    expect(() => parseSchedule(input)).toThrow(UsageError);
    expect(() => parseSchedule(input)).toThrow(message);
  });
});

describe('when a scheduled job is due', () => {
  it('every D: D after the last start, less the slack cron jitter needs; at once when never started', () => {
    const s = parseSchedule('every 1h');
    expect(scheduleDue(s, null, at('2026-12-03T10:00:00Z')).due).toBe(true);
    expect(scheduleDue(s, at('2026-12-03T10:00:00Z'), at('2026-12-03T10:59:29Z')).due).toBe(false);
    // Due within the slack: due since now, not since 11:00, still to come.
    expect(scheduleDue(s, at('2026-12-03T10:00:00Z'), at('2026-12-03T10:59:31Z'))).toEqual({ due: true, at: new Date('2026-12-03T10:59:31Z') });
    expect(scheduleDue(s, at('2026-12-03T10:00:00Z'), at('2026-12-03T11:20:00Z'))).toEqual({ due: true, at: new Date('2026-12-03T11:00:00Z') });
  });

  it('a cron expression: due once its latest fire time is later than the last start', () => {
    const s = parseSchedule('TZ=UTC 0 3 * * *');
    const lastStart = at('2026-12-02T03:00:01Z');
    expect(scheduleDue(s, lastStart, at('2026-12-03T02:58:00Z'))).toEqual({ due: false, at: new Date('2026-12-03T03:00:00Z') });
    expect(scheduleDue(s, lastStart, at('2026-12-03T03:00:00.500Z')).due).toBe(true);
    // cron started the minute's line a moment early: that start is the fire's run...
    expect(scheduleDue(s, lastStart, at('2026-12-03T02:59:59.600Z')).due).toBe(true);
    // ...and the next minute's line does not run it again.
    expect(scheduleDue(s, at('2026-12-03T02:59:59.600Z'), at('2026-12-03T03:01:00.200Z')).due).toBe(false);
  });

  it('every minute, with cron a little early or late each time, runs once a minute', () => {
    const s = parseSchedule('TZ=UTC * * * * *');
    let last: number | null = null;
    let ran = 0;
    const starts = [0.5, 59.6, 120.3, 179.8, 240.9, 299.1, 360.1].map((s) => at('2026-12-03T10:00:00Z') + s * 1000);
    for (const now of starts) {
      if (scheduleDue(s, last, now).due) {
        ran++;
        last = now;
      }
    }
    expect(ran).toBe(starts.length);
  });

  it('after downtime, a missed job runs once, not once per missed fire', () => {
    const s = parseSchedule('TZ=UTC 0 * * * *');
    const lastStart = at('2026-12-03T01:00:00Z');
    // Due since the first fire it missed (02:00): how late it is.
    expect(scheduleDue(s, lastStart, at('2026-12-03T07:42:00Z'))).toEqual({ due: true, at: new Date('2026-12-03T02:00:00Z') });
    expect(scheduleDue(s, at('2026-12-03T07:42:00Z'), at('2026-12-03T07:43:00Z'))).toEqual({ due: false, at: new Date('2026-12-03T08:00:00Z') });
  });

  it('across the spring-forward gap, a job at 02:30 runs at 03:00, once', () => {
    // Europe/Warsaw, 29 March 2026: 02:00 CET becomes 03:00 CEST (01:00 UTC).
    const s = parseSchedule('TZ=Europe/Warsaw 30 2 * * *');
    const lastStart = at('2026-03-28T01:30:00Z');
    expect(scheduleDue(s, lastStart, at('2026-03-29T00:58:00Z'))).toEqual({ due: false, at: new Date('2026-03-29T01:00:00Z') });
    expect(scheduleDue(s, lastStart, at('2026-03-29T01:00:01Z'))).toEqual({ due: true, at: new Date('2026-03-29T01:00:00Z') });
    expect(scheduleDue(s, at('2026-03-29T01:00:01Z'), at('2026-03-29T02:00:00Z')).due).toBe(false);
    expect(scheduleDue(s, at('2026-03-29T01:00:01Z'), at('2026-03-30T00:30:01Z')).due).toBe(true);
  });

  it('in the skipped hour, a job at fixed times (a list too) runs at the change, as Vixie cron; one with * or / does not', () => {
    const before = at('2026-03-28T01:30:00Z');
    expect(scheduleDue(parseSchedule('TZ=Europe/Warsaw 0,30 2 * * *'), before, at('2026-03-29T01:00:01Z'))).toEqual({ due: true, at: new Date('2026-03-29T01:00:00Z') });
    expect(scheduleDue(parseSchedule('TZ=Europe/Warsaw */30 2 * * *'), before, at('2026-03-29T01:00:01Z')).due).toBe(false);
  });

  it('across the fall-back repeat, a job with * or / runs in both 02:00 hours', () => {
    const s = parseSchedule('TZ=Europe/Warsaw */30 2 * * *');
    // 02:30 CEST (00:30 UTC), then 02:00 and 02:30 CET (01:00 and 01:30 UTC): due since the first.
    expect(scheduleDue(s, at('2026-10-25T00:30:02Z'), at('2026-10-25T01:30:02Z'))).toEqual({ due: true, at: new Date('2026-10-25T01:00:00Z') });
  });

  it("allows for cron's jitter on an invocation's first look, not on a loop's later ones", () => {
    const s = parseSchedule('TZ=UTC 29 7 * * *');
    const last = at('2026-12-02T07:29:00Z');
    // 30 s early: cron's start of the 07:29 line a little before its minute, not a loop's look.
    expect(scheduleDue(s, last, at('2026-12-03T07:28:45Z')).due).toBe(true);
    expect(scheduleDue(s, last, at('2026-12-03T07:28:45Z'), false).due).toBe(false);
    expect(scheduleDue(s, last, at('2026-12-03T07:29:00Z'), false)).toEqual({ due: true, at: new Date('2026-12-03T07:29:00Z') });
    const every = parseSchedule('every 1m');
    expect(scheduleDue(every, at('2026-12-03T07:00:00Z'), at('2026-12-03T07:00:55Z')).due).toBe(true);
    expect(scheduleDue(every, at('2026-12-03T07:00:00Z'), at('2026-12-03T07:00:55Z'), false).due).toBe(false);
  });

  it('across the fall-back repeat, a job at 02:30 runs at the first 02:30 only', () => {
    // 25 October 2026: 03:00 CEST becomes 02:00 CET (01:00 UTC), so 02:30 comes twice.
    const s = parseSchedule('TZ=Europe/Warsaw 30 2 * * *');
    const first = at('2026-10-25T00:30:02Z');
    expect(scheduleDue(s, at('2026-10-24T00:30:00Z'), first).due).toBe(true);
    expect(scheduleDue(s, first, at('2026-10-25T01:30:02Z'))).toEqual({ due: false, at: new Date('2026-10-26T01:30:00Z') });
  });

  it('reads the expression in its zone, not the host\'s', () => {
    const s = parseSchedule('TZ=America/New_York 0 9 * * 1-5');
    // Thursday 3 December 2026, 09:00 EST is 14:00 UTC.
    expect(scheduleDue(s, at('2026-12-02T14:00:00Z'), at('2026-12-03T13:59:00Z'))).toEqual({ due: false, at: new Date('2026-12-03T14:00:00Z') });
    expect(scheduleDue(s, at('2026-12-02T14:00:00Z'), at('2026-12-03T14:00:30Z')).due).toBe(true);
    // Friday's run done, the next is Monday's.
    expect(scheduleDue(s, at('2026-12-04T14:00:00Z'), at('2026-12-05T12:00:00Z')).at).toEqual(new Date('2026-12-07T14:00:00Z'));
  });

  it('day of month and day of week: OR when both are restricted, AND when either starts with *, as Vixie cron', () => {
    // Thursday 3 December 2026.
    const or = parseSchedule('TZ=UTC 0 0 3,4 * mon');
    expect(scheduleDue(or, at('2026-12-02T12:00:00Z'), at('2026-12-03T00:00:30Z')).due).toBe(true);
    const and = parseSchedule('TZ=UTC 0 0 */2 * mon');
    // Mondays on odd days only: 7 December is one.
    expect(scheduleDue(and, at('2026-12-02T12:00:00Z'), at('2026-12-03T12:00:00Z')).at).toEqual(new Date('2026-12-07T00:00:00Z'));
  });
});

describe('a fixed time in a spring-forward gap that ends at midnight', () => {
  // America/Nuuk, 2026-03-28: 22:59 jumps to Sunday 00:00 (01:00 UTC). A job at 23:30 runs
  // when the gap ends, as in any other gap (issue 35, item 15): croner skipped the night.
  const at = Date.parse('2026-03-29T01:00:00Z');
  it('fires when the gap ends, and then as usual', () => {
    const schedule = parseSchedule('TZ=America/Nuuk 30 23 * * *');
    if (schedule.kind !== 'cron') throw new Error('a cron schedule');
    expect(schedule.cron.nextRun(new Date('2026-03-28T12:00:00Z'))?.toISOString()).toBe('2026-03-29T01:00:00.000Z');
    expect(schedule.cron.nextRun(new Date(at))?.toISOString()).toBe('2026-03-30T00:30:00.000Z');
    expect(schedule.cron.previousRuns(2, new Date(at + 1000)).map((d) => d.toISOString())).toEqual(['2026-03-29T01:00:00.000Z', '2026-03-28T01:30:00.000Z']);
    expect(scheduleDue(schedule, Date.parse('2026-03-28T01:30:00Z'), at + 1000).due).toBe(true);
  });

  it('not on a day the job does not run: a Friday-only job skips nothing on that Saturday', () => {
    const schedule = parseSchedule('TZ=America/Nuuk 30 23 * * 5');
    if (schedule.kind !== 'cron') throw new Error('a cron schedule');
    expect(schedule.cron.nextRun(new Date('2026-03-28T12:00:00Z'))?.toISOString()).toBe('2026-04-04T00:30:00.000Z');
  });
});
