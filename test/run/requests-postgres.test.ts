import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, serialRuns } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// The arguments each run of args.sh got, in order.
const argsOfRuns = (file: string) => lines(file).filter((l) => l.startsWith('start ')).map((l) => l.split(' ').slice(2).join(' '));

describe.each(STORES)('minimum interval and requests (%s)', (kind) => {
  it('--min-interval: runs when due, skips silently when not, runs again once the interval has passed', async () => {
    const box = storeBox(kind);
    const job = box.job('hourly');
    const log = box.path('log');
    // The last run, an hour and more ago (as after downtime; its start is the log's clock's,
    // so it is written there): due.
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    await box.insertRuns([{ job, status: 'succeeded', startedAt: new Date(Date.now() - 3_700_000), durationMs: 1000 }]);
    expect(await cronguard(['-n', job, '--min-interval', '1h', '--', fixture('args.sh'), log, 'due'], box.env)).toMatchObject({ code: 0, stderr: '' });
    const notDue = await cronguard(['-v', '-n', job, '--min-interval', '1h', '--', fixture('args.sh'), log, 'early'], box.env);
    expect(notDue.code).toBe(0);
    expect(notDue.stderr).toMatch(/the last run started \S+ ago, less than --min-interval 1h00m; next due at \S+; skipping with exit 0/);
    expect(argsOfRuns(log)).toEqual(['due']);
  });

  it('a request overrides the interval; the run serves it, and run and request point at each other', async () => {
    const box = storeBox(kind);
    const job = box.job('report');
    await cronguard(['migrate'], box.env);
    await cronguard(['-n', job, '--min-interval', '1h', '--', 'true'], box.env);
    const id = await box.request(job);
    expect((await cronguard(['-n', job, '--min-interval', '1h', '--', 'true'], box.env)).code).toBe(0);
    const [first, second] = await box.runs();
    expect(first?.trigger).toBe('cron');
    expect(second).toMatchObject({ trigger: 'request', request_id: id, status: 'succeeded' });
    expect(await box.requests()).toEqual([expect.objectContaining({ id, status: 'succeeded', run_id: second?.id, attempts: 1, exit_code: 0 })]);
  });

  it('coalesces requests without arguments into one run', async () => {
    const box = storeBox(kind);
    const job = box.job('coalesce');
    await cronguard(['migrate'], box.env);
    for (let i = 0; i < 10; i++) await box.request(job);
    expect((await cronguard(['-n', job, '--on-request', '--', 'true'], box.env)).code).toBe(0);
    const [run, ...others] = await box.runs();
    expect(others).toEqual([]);
    expect((await box.requests()).map((r) => [r.status, r.run_id])).toEqual(Array(10).fill(['succeeded', run?.id]));
  });

  it('--batch: ten requests become one run with ten targets; --batch-max bounds a run, the rest wait', async () => {
    const box = storeBox(kind);
    const job = box.job('send');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    for (let i = 1; i <= 10; i++) await box.request(job, [`to-${i}`]);
    await cronguard(['-n', job, '--on-request', '--batch', '--', fixture('args.sh'), log], box.env);
    expect(argsOfRuns(log)).toEqual([Array.from({ length: 10 }, (_, i) => `to-${i + 1}`).join(' ')]);
    for (let i = 1; i <= 7; i++) await box.request(job, [`more-${i}`]);
    for (let i = 0; i < 4; i++) await cronguard(['-n', job, '--on-request', '--batch', '--batch-max', '3', '--', fixture('args.sh'), log], box.env);
    expect(argsOfRuns(log).slice(1)).toEqual(['more-1 more-2 more-3', 'more-4 more-5 more-6', 'more-7']);
    expect((await box.runs()).at(-1)?.command).toMatch(/ more-7$/);
  });

  it('without --batch, a request with arguments gets a run of its own; those without ride along', async () => {
    const box = storeBox(kind);
    const job = box.job('single');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    await box.request(job, ['a']);
    await box.request(job);
    await box.request(job, ['b', 'c']);
    for (let i = 0; i < 3; i++) await cronguard(['-n', job, '--on-request', '--', fixture('args.sh'), log], box.env);
    expect(argsOfRuns(log)).toEqual(['a', 'b c']);
    expect((await box.requests()).map((r) => r.run_id)).toEqual([1, 1, 2]);
  });

  it('--on-request runs nothing without a request', async () => {
    const box = storeBox(kind);
    const result = await cronguard(['-v', '-n', box.job('idle'), '--on-request', '--', 'touch', box.path('ran')], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/no request is due \(--on-request\); skipping with exit 0/);
    expect(await box.runs()).toEqual([]);
  });

  it('claims every request exactly once, however many invocations race for them (no lock at all)', async () => {
    const box = storeBox(kind);
    const job = box.job('race');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    for (let i = 1; i <= 40; i++) await box.request(job, [`r${i}`]);
    while ((await box.requests()).some((r) => r.status === 'pending')) {
      await Promise.all(Array.from({ length: 6 }, () => cronguard(['-l', 'none', '-n', job, '--on-request', '--batch', '--batch-max', '4', '--', fixture('args.sh'), log], box.env)));
    }
    const served = argsOfRuns(log).flatMap((a) => a.split(' '));
    expect(served.sort()).toEqual(Array.from({ length: 40 }, (_, i) => `r${i + 1}`).sort());
    expect((await box.requests()).every((r) => r.status === 'succeeded' && r.attempts === 1)).toBe(true);
  });

  it('a paused job runs nothing and its requests wait; once resumed, they are served', async () => {
    const box = storeBox(kind);
    const job = box.job('paused');
    await cronguard(['migrate'], box.env);
    expect(await cronguard(['disable', job, '--reason', 'maintenance window', '--by', 'ops'], box.env)).toMatchObject({ code: 0 });
    const id = await box.request(job);
    const skipped = await cronguard(['-v', '-n', job, '--', 'true'], box.env);
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toMatch(new RegExp(`${job}: paused since \\S+ by ops: maintenance window \\(cronguard enable ${job} resumes it\\); skipping with exit 0`));
    expect(await box.runs()).toEqual([]);
    expect((await box.requests())[0]?.status).toBe('pending');
    await cronguard(['enable', job], box.env);
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    expect(await box.requests()).toEqual([expect.objectContaining({ id, status: 'succeeded' })]);
  });

  it('end to end: cron every 200 ms with --min-interval 2s, a web application inserting requests: each served once, no two runs overlap', async () => {
    const box = storeBox(kind);
    const job = box.job('e2e');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    const cron = (async () => {
      for (let i = 0; i < 25; i++) {
        await cronguard(['-n', job, '--min-interval', '2s', '--', fixture('hold.sh'), log, box.path('always')], box.env);
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    await import('node:fs').then((fs) => fs.writeFileSync(box.path('always'), ''));
    const ids: number[] = [];
    for (let i = 0; i < 8; i++) {
      ids.push(await box.request(job));
      await new Promise((r) => setTimeout(r, 150));
    }
    await cron;
    // Whatever the last tick left pending is served by the next.
    while ((await box.requests()).some((r) => r.status === 'pending')) await cronguard(['-n', job, '--min-interval', '2s', '--', fixture('hold.sh'), log, box.path('always')], box.env);
    serialRuns(log);
    const requests = await box.requests();
    expect(requests.map((r) => r.status)).toEqual(Array(8).fill('succeeded'));
    const runIds = new Set((await box.runs()).map((r) => r.id));
    for (const r of requests) expect(runIds.has(r.run_id as number)).toBe(true);
  });
});
