import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { STORES, type StoreBox, storeBox } from '../stores.js';

const MINUTE = 60_000;

// A job with a stored schedule, whose last (successful) run started `agoMs` ago.
async function scheduledJob(box: StoreBox, base: string, spec: string, agoMs: number): Promise<{ job: string; startedAt: Date }> {
  const job = box.job(base);
  expect((await cronguard(['migrate'], box.env)).code).toBe(0);
  await box.setSchedule(job, spec);
  const startedAt = new Date(Date.now() - agoMs);
  await box.insertRuns([{ job, status: 'succeeded', startedAt, durationMs: 1000 }]);
  return { job, startedAt };
}

describe.each(STORES)('check and metrics of a job with a stored schedule (%s)', (kind) => {
  it('is late when its schedule made it due more than --max-age ago, or it has not succeeded in twice its period', async () => {
    const box = storeBox(kind);
    // Every hour; last run 90 minutes ago: due since 30 minutes ago.
    const { job, startedAt } = await scheduledJob(box, 'hourly', 'every 1h', 90 * MINUTE);
    const dueSince = new Date(startedAt.getTime() + 60 * MINUTE).toISOString().replace(/\.\d+Z$/, '');
    const late = await cronguard(['check', job, '--max-age', '10m'], box.env);
    expect(late.code).toBe(2);
    expect(late.stdout).toMatch(new RegExp(`^CRITICAL - ${job} is late: due since ${dueSince}\\.\\d+Z by its schedule 'every 1h', 30m\\d*s? ago \\(over --max-age 10m00s\\); last succeeded 1h30m\\S* ago in 1s \\| .* late=1[89]\\d\\d\\.?\\d*s;;600;0;\\n$`));
    const warned = await cronguard(['check', job, '--warn-age', '20m', '--max-age', '1h'], box.env);
    expect(warned.code).toBe(1);
    expect(warned.stdout).toMatch(/^WARNING - \S+ is late: .* \(over --warn-age 20m00s\)/);
    // Without --max-age: late is not judged, twice the period is (90 minutes is less).
    const ok = await cronguard(['check', job], box.env);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(new RegExp(`^OK - ${job} succeeded 1h30m\\S* ago in 1s; due since ${dueSince}`));
    const metrics = (await cronguard(['metrics'], box.env)).stdout;
    expect(metrics).toContain(`cronguard_next_due_timestamp_seconds{job="${job}"} ${(startedAt.getTime() + 60 * MINUTE) / 1000}`);
  });

  it('is not stale across a gap its schedule has (a weekday job on a Sunday), but is after two missed fires', async () => {
    const box = storeBox(kind);
    // Fires on Mondays and Tuesdays: its last success, at Tuesday's fire, stays fresh until
    // next Monday's, however many days lie between; two fires missed make it stale.
    const day = 86400e3;
    const now = Date.now();
    // The latest Tuesday 03:00 UTC: since then at most Monday's fire has come.
    let tuesday = Math.floor(now / day) * day - ((new Date(now).getUTCDay() + 5) % 7) * day + 3 * 3600e3;
    if (tuesday > now) tuesday -= 7 * day;
    const { job } = await scheduledJob(box, 'weekly', 'TZ=UTC 0 3 * * 1,2', now - tuesday - 5000);
    const fresh = await cronguard(['check', job], box.env);
    expect(fresh).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^OK - ${job} succeeded .* ago in 1s; (next due|due since) `)) });
    const { job: old } = await scheduledJob(box, 'weekly-old', 'TZ=UTC 0 3 * * 1,2', 15 * day);
    expect(await cronguard(['check', old], box.env)).toMatchObject({ code: 2, stdout: expect.stringMatching(/missed two fires in a row/) });
  });

  it('is CRITICAL past twice its period without a success, and when its stored schedule cannot be read', async () => {
    const box = storeBox(kind);
    const { job } = await scheduledJob(box, 'stale', 'every 1h', 150 * MINUTE);
    const stale = await cronguard(['check', job], box.env);
    expect(stale.code).toBe(2);
    expect(stale.stdout).toMatch(new RegExp(`^CRITICAL - ${job} succeeded 2h30m\\S* ago in 1s: it missed two fires in a row of its schedule 'every 1h' \\(none succeeded since \\S+Z\\)`));
    if (kind === 'postgres') return;
    // An UPDATE by hand that the store's CHECK lets through.
    await box.setSchedule(job, '61 * * * *');
    const unread = await cronguard(['check', job, '--max-age', '1h'], box.env);
    expect(unread.code).toBe(2);
    expect(unread.stdout).toMatch(new RegExp(`^CRITICAL - ${job} has a stored schedule that cannot be read \\(schedule: '61 \\* \\* \\* \\*' is not valid: minute 61 is outside 0-59 .*\\): --scheduled does not run it`));
  });
});
