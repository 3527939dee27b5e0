import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

const HOUR = 3_600_000;
const ago = (ms: number) => new Date(Date.now() - ms);

const json = async <T>(args: string[], env: NodeJS.ProcessEnv): Promise<T> => {
  const result = await cronguard([...args, '--json'], env);
  expect(result).toMatchObject({ code: 0, stderr: '' });
  return JSON.parse(result.stdout) as T;
};

describe.each(STORES)('status at a glance (%s)', (kind) => {
  it('adds success rate, median and p95 over the last 50 runs, the recent runs oldest first, and totals', async () => {
    const box = storeBox(kind);
    const job = box.job('stats');
    await cronguard(['migrate'], box.env);
    // 60 runs: the oldest 10 (failed, very long) fall outside the last 50.
    const seed = Array.from({ length: 60 }, (_, i) => ({
      job,
      status: i < 10 || i % 10 === 9 ? 'failed' : 'succeeded',
      startedAt: ago((60 - i) * HOUR),
      durationMs: i < 10 ? 999_000 : (i % 50) * 1000 + 1000,
    }));
    await box.insertRuns(seed);
    const [status] = await json<Record<string, unknown>[]>(['status', job], box.env);
    const recent = status?.recent as { id: number; status: string; duration_ms: number }[];
    expect(recent).toHaveLength(50);
    expect(recent.map((r) => r.id)).toEqual([...recent.map((r) => r.id)].sort((a, b) => a - b));
    const durations = seed.slice(10).map((r) => r.durationMs).sort((a, b) => a - b);
    // MySQL counts only the runs cronguard records (it has no trigger: docs/fleet-mysql.md, "Where MySQL
    // differs"); these were inserted by hand.
    const totals = kind === 'mysql' ? {} : { runs_total: { succeeded: 45, failed: 15 } };
    expect(status).toMatchObject({
      job, state: 'idle', last_status: 'failed', last_exit_code: 1, success_rate: 45 / 50,
      duration_median_ms: durations[24], duration_p95_ms: durations[47],
      ...totals, last_success_duration_ms: 9000, command: null,
    });
  });

  it('knows the command, host, skips of the last run and, with --min-interval, when it is next due', async () => {
    const box = storeBox(kind);
    const job = box.job('due');
    const log = box.path('log');
    const holder = start(['-n', job, '--min-interval', '1h', '--', fixture('hold.sh'), log, box.path('go')], box.env);
    await waitFor(() => lines(log).length > 0, 'the first run to start');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    release(box.path('go'));
    await holder.done;
    const [status] = await json<Record<string, unknown>[]>(['status', job], box.env);
    const last = Date.parse(status?.last_started_at as string);
    expect(status).toMatchObject({ last_overlaps: 1, min_interval_ms: HOUR, command: expect.stringContaining('hold.sh'), host: expect.any(String) });
    // Due 30 s early: the slack for cron's jitter (a tenth of the interval, at most 30 s).
    expect(Date.parse(status?.next_due_at as string)).toBe(last + HOUR - 30_000);
    const asked = Date.now();
    const detail = await cronguard(['status', job], { ...box.env, TZ: 'UTC' });
    const answered = Date.now();
    const due = detail.stdout.match(/next due +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(in (\d+)m(\d+)s\) \(--min-interval 1h00m\)/);
    expect(due, detail.stdout).not.toBeNull();
    // However long the command took: the time left as it was between asking and the answer.
    const left = (Number(due?.[1]) * 60 + Number(due?.[2])) * 1000;
    const dueAt = last + HOUR - 30_000;
    expect(left).toBeGreaterThanOrEqual(Math.floor((dueAt - answered) / 1000) * 1000 - 1000);
    expect(left).toBeLessThanOrEqual(dueAt - asked + 1000);
    expect(detail.stdout).toMatch(/\((now|[\d.]+m?s ago)\), 1 skipped\n/);
  });

  it('fits 80 columns with long names, marks failures in the sparkline, and colours only when asked', async () => {
    const box = storeBox(kind);
    const long = box.job(`a-rather-long-job-name-for-the-nightly-report-${'x'.repeat(30)}`);
    const flaky = box.job('flaky');
    await cronguard(['-n', long, '--', 'true'], box.env);
    await cronguard(['-n', flaky, '--', 'true'], box.env);
    await cronguard(['-n', flaky, '--', 'false'], box.env);
    const plain = await cronguard(['status'], { ...box.env, LANG: 'C.UTF-8', COLUMNS: '80' });
    expect(plain.code).toBe(0);
    const rows = plain.stdout.trimEnd().split('\n');
    expect(rows[0]).toMatch(/^JOB +STATE +LAST +AGO +OK AGO/);
    for (const row of rows) expect(row.length).toBeLessThanOrEqual(80);
    expect(rows.find((r) => r.startsWith(flaky.slice(0, 20)))).toMatch(/failed 1 .*[▁▂▃▄▅▆▇█]×$/u);
    expect(rows.some((r) => r.includes('…'))).toBe(true);
    expect(plain.stdout).not.toMatch(/\x1b\[/);
    const ascii = await cronguard(['status'], { ...box.env, LANG: 'C', LC_ALL: '' });
    expect(ascii.stdout).toMatch(/[_.:|]x\n/);
    const coloured = await cronguard(['status'], { ...box.env, FORCE_COLOR: '1', NO_COLOR: '1' });
    expect(coloured.stdout).toMatch(/\x1b\[31m/);
    expect((await cronguard(['status'], { ...box.env, NO_COLOR: '1' })).stdout).not.toMatch(/\x1b\[/);
  });
});

describe.each(STORES)('history (%s)', (kind) => {
  it('filters by several jobs, host and --since, shows the command, and local times unless --json', async () => {
    const box = storeBox(kind);
    const [a, b, c] = ['a', 'b', 'c'].map((n) => box.job(n)) as [string, string, string];
    await cronguard(['migrate'], box.env);
    await box.insertRuns([
      { job: a, status: 'succeeded', startedAt: new Date('2026-01-10T12:00:00Z'), durationMs: 1000, host: 'old-host' },
      { job: b, status: 'failed', startedAt: ago(3 * HOUR), durationMs: 2000, host: 'web1' },
    ]);
    await cronguard(['-n', a, '--', 'echo', 'hello world'], box.env);
    await cronguard(['-n', c, '--', 'true'], box.env);
    const both = await json<{ job: string }[]>(['history', a, b], box.env);
    expect(both.map((r) => r.job)).toEqual([a, b, a]);
    expect((await json<{ host: string }[]>(['history', '--host', 'web1'], box.env)).map((r) => r.host)).toEqual(['web1']);
    expect((await json<{ job: string }[]>(['history', '--since', '1h'], box.env)).map((r) => r.job)).toEqual([c, a]);
    expect((await json<{ job: string }[]>(['history', a, '--since', '2026-01-10 00:00'], box.env))).toHaveLength(2);
    const [old] = await json<{ started_at: string }[]>(['history', a, '--host', 'old-host'], box.env);
    expect(old?.started_at).toBe('2026-01-10T12:00:00.000Z');
    const table = await cronguard(['history', a, '--host', 'old-host'], { ...box.env, TZ: 'Asia/Kolkata' });
    expect(table.stdout).toMatch(/^ID +JOB +STATUS +TRIGGER +STARTED \((GMT\+5:30|IST)\) +DURATION +EXIT +SKIPS +HOST +COMMAND\n/);
    expect(table.stdout).toContain('2026-01-10 17:30:00');
    const mine = await cronguard(['history', a, '--limit', '1'], box.env);
    expect(mine.stdout).toMatch(/echo 'hello world'\n$/);
  });

  it('shows how long a running run has run so far', async () => {
    const box = storeBox(kind);
    const job = box.job('long');
    const log = box.path('log');
    const running = start(['-n', job, '--', fixture('hold.sh'), log, box.path('go')], box.env);
    await waitFor(() => lines(log).length > 0, 'the run to start');
    const table = await cronguard(['history', job], box.env);
    release(box.path('go'));
    await running.done;
    expect(table.stdout).toMatch(/running +\w+ +\S+ \S+ +[\d.]+m?s\+ /);
  });

  it('refuses bad filters with one line and exit 64', async () => {
    const box = storeBox(kind);
    for (const args of [['--since', 'soon'], ['--since', '25:00'], ['--host', ''], ['--status', 'won'], ['bad/name']]) {
      const result = await cronguard(['history', ...args], box.env);
      expect(result.code, args.join(' ')).toBe(64);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
    }
  });
});
