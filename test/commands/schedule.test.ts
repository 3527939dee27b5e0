import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { pgSandbox, sql } from '../pg-helpers.js';
import { STORES, storeBox } from '../stores.js';

const DETAIL = '(five fields: minute hour day-of-month month day-of-week, e.g. "0 3 * * 1-5")';

describe.each(STORES)('cronguard schedule (%s)', (kind) => {
  it('sets, shows, changes and clears a job\'s schedule, which status --json carries', async () => {
    const box = storeBox(kind);
    const job = box.job('report');
    const set = await cronguard(['schedule', job, '--cron', '0 3 * * 1-5', '--tz', 'Europe/Warsaw'], box.env);
    expect(set).toMatchObject({ code: 0, stdout: '' });
    expect(set.stderr).toMatch(new RegExp(`^cronguard: ${job} scheduled: TZ=Europe/Warsaw 0 3 \\* \\* 1-5 \\(next fire \\d{4}-\\d\\d-\\d\\dT0[12]:00:00\\.000Z\\)\\n$`));
    expect(await cronguard(['schedule', job], box.env)).toMatchObject({ code: 0, stdout: 'TZ=Europe/Warsaw 0 3 * * 1-5\n', stderr: '' });
    expect(await cronguard(['schedule', job, '--every', '15m'], box.env)).toMatchObject({ code: 0, stderr: `cronguard: ${job} scheduled: every 15m\n` });
    const [status] = JSON.parse((await cronguard(['status', '--json', job], box.env)).stdout) as { schedule: string }[];
    expect(status?.schedule).toBe('every 15m');
    expect(status).toMatchObject({ schedule_problem: null });
    // Never run: due since now.
    expect((await cronguard(['status', job], box.env)).stdout).toMatch(/\n {2}schedule {5}every 15m \(due since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(/);
    expect(await cronguard(['schedule', job, '--cron', 'TZ=UTC @daily'], box.env)).toMatchObject({ code: 0 });
    expect((await cronguard(['schedule', job], box.env)).stdout).toBe('TZ=UTC 0 0 * * *\n');
    expect(await cronguard(['schedule', job, '--clear'], box.env)).toMatchObject({ code: 0, stderr: `cronguard: ${job} has no schedule now\n` });
    expect((await cronguard(['schedule', job], box.env)).stdout).toBe('none\n');
  });

  it('sets and clears it by SQL, as a web application does', async () => {
    const box = storeBox(kind);
    const job = box.job('app');
    await cronguard(['migrate'], box.env);
    await box.setSchedule(job, 'every 2h');
    expect((await cronguard(['schedule', job], box.env)).stdout).toBe('every 2h\n');
    await box.setSchedule(job, '30 6 * * *');
    expect((await cronguard(['schedule', job], box.env)).stdout).toBe('30 6 * * *\n');
    await box.setSchedule(job, null);
    expect((await cronguard(['schedule', job], box.env)).stdout).toBe('none\n');
  });

  it.skipIf(kind === 'postgres')('shows a schedule written by hand that cannot be read, and why', async () => {
    const box = storeBox(kind);
    const job = box.job('hand');
    await cronguard(['migrate'], box.env);
    await box.setSchedule(job, '61 * * * *');
    const why = "schedule: '61 * * * *' is not valid: minute 61 is outside 0-59";
    expect((await cronguard(['status', job], box.env)).stdout).toContain(`  schedule     61 * * * * (cannot be read: ${why}`);
    // status --json carries why, for a web form to show (issue 36, item 13).
    const [shown] = JSON.parse((await cronguard(['status', '--json', job], box.env)).stdout) as { schedule_problem: string | null }[];
    expect(shown?.schedule_problem).toMatch(new RegExp(`^${why.replace(/[*()]/g, '\\$&')}`));
    // `schedule NAME` shows it and says why it is not in force: exit 1, one line.
    const said = await cronguard(['schedule', job], box.env);
    expect(said).toMatchObject({ code: 1, stdout: '61 * * * *\n' });
    expect(said.stderr).toMatch(new RegExp(`^cronguard schedule: ${job}'s stored schedule cannot be read \\(${why.replace(/[*()]/g, '\\$&')}[^\\n]*\\): --scheduled does not run it; set it again with --every or --cron\\n$`));
    // The zone passes the shape check with any character: shown escaped, on one line.
    await box.setSchedule(job, 'TZ=\x1b[2J 0 0 * * *');
    const escaped = await cronguard(['schedule', job], box.env);
    expect(escaped).toMatchObject({ code: 1, stdout: 'TZ=\\x1b[2J 0 0 * * *\n' });
    expect(escaped.stderr).not.toContain('\x1b');
  });

  it('refuses a schedule of the wrong shape by SQL', async () => {
    const box = storeBox(kind);
    await cronguard(['migrate'], box.env);
    for (const spec of ['0 3 * *', 'every', 'rm -rf /', '0 3 * * 1; x', 'every 1h 0 * * * *']) {
      await expect(box.setSchedule(box.job('app'), spec), spec).rejects.toThrow();
    }
    expect((await cronguard(['schedule', box.job('app')], box.env)).stdout).toBe('none\n');
  });

  it.each([
    [['--cron', '61 * * * *'], `--cron: '61 * * * *' is not valid: minute 61 is outside 0-59 ${DETAIL}`],
    [['--cron', '0 0 31 2 *'], `--cron: '0 0 31 2 *' never fires ${DETAIL}`],
    [['--cron', '0 3 * * *', '--tz', 'Mars/Olympus'], "--tz: unknown time zone 'Mars/Olympus' (an IANA name, e.g. Europe/Warsaw, America/New_York or UTC)"],
    [['--every', 'soon'], "--every: invalid duration 'soon' (use e.g. 500ms, 10s, 5m, 2h, 1d, 1h30m or a number of seconds)"],
    [['--every', '100ms'], '--every: 100ms is shorter than 1s'],
    [['--every', '1h', '--cron', '0 * * * *'], 'give one of --every, --cron or --clear'],
    [['--tz', 'UTC'], '--tz applies to --cron'],
    [['--cron', 'constructor'], `--cron: 'constructor' has 1 field ${DETAIL}`],
    [['--cron', '__proto__'], `--cron: '__proto__' has 1 field ${DETAIL}`],
    [['--cron', '@daily', '--tz', 'Europe/Warsaw\nX'], "--tz: unknown time zone 'Europe/Warsaw\\nX' (an IANA name, e.g. Europe/Warsaw, America/New_York or UTC)"],
    [['--every', '1m\nX'], "--every: invalid duration '1m\\nX' (use e.g. 500ms, 10s, 5m, 2h, 1d, 1h30m or a number of seconds)"],
    [['--cron', '0 0 * * \x1b[2J'], `--cron: '0 0 * * \\x1b[2J' has a field cronguard does not read, '\\x1b[2J' ${DETAIL}`],
    // An offset, not a zone's name: newer Node reads it, older Node and PostgreSQL do not.
    [['--cron', '0 3 * * *', '--tz', '+03:00'], "--tz: unknown time zone '+03:00' (an IANA name, e.g. Europe/Warsaw, America/New_York or UTC)"],
    // Node knows it; PostgreSQL, which would read it at every run, does not.
    ...(kind === 'postgres'
      ? [[['--cron', '0 3 * * *', '--tz', 'US/Pacific-New'], "PostgreSQL's set_schedule() refuses it: unknown time zone 'US/Pacific-New' (an IANA name, e.g. Europe/Warsaw, America/New_York or UTC)"] as [string[], string]]
      : []),
  ])('refuses %j with one line and 64, storing nothing', async (flags, message) => {
    const box = storeBox(kind);
    const job = box.job('bad');
    await cronguard(['schedule', job, '--every', '1h'], box.env);
    const result = await cronguard(['schedule', job, ...flags], box.env);
    expect(result).toMatchObject({ code: 64, stdout: '', stderr: `cronguard schedule: ${message} (see cronguard schedule --help)\n` });
    expect((await cronguard(['schedule', job], box.env)).stdout).toBe('every 1h\n');
  });

  it('clearing an unknown job is "not found" (1), not a silent success', async () => {
    const box = storeBox(kind);
    expect(await cronguard(['schedule', box.job('nosuch'), '--clear'], box.env)).toMatchObject({
      code: 1,
      stderr: `cronguard schedule: no job ${box.job('nosuch')} in the run log; nothing to clear\n`,
    });
  });
});

describe('PostgreSQL: set_schedule(job, spec)', () => {
  it('checks every value as cronguard schedule does, and stores the same spelling', async () => {
    const box = pgSandbox();
    await cronguard(['migrate'], box.env);
    const set = async (spec: string | null) => (await sql<{ s: string | null }>(`SELECT "${box.schema}".set_schedule('j', $1) AS s`, [spec]))[0]?.s;
    expect(await set('  0  3 * *  MON-FRI ')).toBe('0 3 * * MON-FRI');
    expect(await set('CRON_TZ=Europe/Warsaw @daily')).toBe('TZ=Europe/Warsaw 0 0 * * *');
    // A zone is kept as given, as the CLI keeps it; names only PostgreSQL knows are refused.
    expect(await set('\tTZ=us/eastern\t0 9 * * *\r\n')).toBe('TZ=us/eastern 0 9 * * *');
    await expect(set('TZ=posixrules 0 3 * * *')).rejects.toMatchObject({ code: '22023' });
    await expect(set('every 0.9999s')).resolves.toBe('every 0.9999s');
    expect(await set('every 1h30m')).toBe('every 1h30m');
    for (const [spec, message] of [
      ['61 * * * *', `schedule: '61 * * * *' is not valid: minute 61 is outside 0-59 ${DETAIL}`],
      ['0 0 * 13 *', `schedule: '0 0 * 13 *' is not valid: month 13 is outside 1-12 ${DETAIL}`],
      ['0 5-3 * * *', `schedule: '0 5-3 * * *' is not valid: hour range 5-3 runs backwards ${DETAIL}`],
      ['*/0 * * * *', `schedule: '*/0 * * * *' is not valid: a step of 0 ${DETAIL}`],
      ['0 2/6 * * *', `schedule: '0 2/6 * * *' is not valid: a step needs a range or * before it (2-23/6, not 2/6) ${DETAIL}`],
      ['0 0 L * *', `schedule: '0 0 L * *' has a field cronguard does not read, 'L' ${DETAIL}`],
      ['0 3 * *', `schedule: '0 3 * *' has 4 fields ${DETAIL}`],
      ['0 0 31 2,4 *', `schedule: '0 0 31 2,4 *' never fires ${DETAIL}`],
      ['TZ=Mars/Olympus 0 3 * * *', "schedule: unknown time zone 'Mars/Olympus' (an IANA name, e.g. Europe/Warsaw, America/New_York or UTC)"],
      ['every 500ms', 'schedule: every: 500ms is shorter than 1s'],
      ['0 0 * * */8', `schedule: '0 0 * * */8' is not valid: a step of 8 is more than 7 ${DETAIL}`],
      ['00007 0 * * *', `schedule: '00007 0 * * *' is not valid: minute 00007 is outside 0-59 ${DETAIL}`],
      ['0 0\u00a01 * *', `schedule: '0 0\u00a01 * *' has 4 fields ${DETAIL}`],
      ['every soon', "schedule: every: invalid duration 'soon' (use e.g. 500ms, 10s, 5m, 2h, 1d, 1h30m or a number of seconds)"],
    ] as const) {
      await expect(set(spec), spec).rejects.toMatchObject({ code: '22023', message });
    }
    expect((await cronguard(['schedule', 'j'], box.env)).stdout).toBe('every 1h30m\n');
    expect(await set(null)).toBeNull();
    expect((await cronguard(['schedule', 'j'], box.env)).stdout).toBe('none\n');
  });

  it('holds a plain UPDATE to the shape', async () => {
    const box = pgSandbox();
    await cronguard(['schedule', 'j', '--every', '1h'], box.env);
    await expect(sql(`UPDATE "${box.schema}".jobs SET schedule = '0  3 * * *' WHERE name = 'j'`)).rejects.toMatchObject({ code: '23514' });
    await sql(`UPDATE "${box.schema}".jobs SET schedule = '0 3 * * *' WHERE name = 'j'`);
    expect((await cronguard(['schedule', 'j'], box.env)).stdout).toBe('0 3 * * *\n');
  });
});
