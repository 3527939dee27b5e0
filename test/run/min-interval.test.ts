import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

const SECOND = 1000;
const ago = (ms: number) => new Date(Date.now() - ms);

// cron starts a `* * * * *` line a little before the minute as often as a little after: a
// job is due when its last start is at least the interval less a slack of a tenth of it
// (at most 30 s) ago, so --min-interval 1m runs every minute and 1h every hour.
describe.each(STORES)('--min-interval and cron\'s jitter (%s)', (kind) => {
  const due = async (interval: string, lastStartAgoMs: number) => {
    const box = storeBox(kind);
    const job = box.job('jitter');
    await cronguard(['migrate'], box.env);
    const startedAt = ago(lastStartAgoMs);
    await box.insertRuns([{ job, status: 'succeeded', startedAt, durationMs: 100 }]);
    const result = await cronguard(['-v', '-n', job, '--min-interval', interval, '--', 'true'], box.env);
    expect(result.code).toBe(0);
    const ran = (await box.runs()).length === 2;
    return { box, job, startedAt, result, ran };
  };

  it('1m: a last start 59.4 s ago is due; 50 s ago is not, and the skip says when it will be', async () => {
    expect((await due('1m', 59.4 * SECOND)).ran).toBe(true);
    const early = await due('1m', 50 * SECOND);
    expect(early.ran).toBe(false);
    const next = new Date(early.startedAt.getTime() + 54 * SECOND).toISOString();
    expect(early.result.stderr).toContain(`less than --min-interval 1m00s; next due at ${next}; skipping with exit 0`);
  });

  it('1h: the slack is at most 30 s (59m50s ago is due, 59m20s is not), and status shows the same next due time', async () => {
    const late = await due('1h', 3590 * SECOND);
    expect(late.ran).toBe(true);
    expect((await due('1h', 3560 * SECOND)).ran).toBe(false);
    // The interval stored is the one configured; the next due time has the slack.
    const status = await cronguard(['status', late.job, '--json'], late.box.env);
    const [job] = JSON.parse(status.stdout) as { next_due_at: string; last_started_at: string; min_interval_ms: number }[];
    expect(job?.min_interval_ms).toBe(3600 * SECOND);
    expect(Date.parse(job?.next_due_at as string)).toBe(Date.parse(job?.last_started_at as string) + 3570 * SECOND);
  });

  // Issue 36, item 11: cron's ticks are a minute apart, so an interval under a minute is no
  // tick's, and a tenth of it let runs of a 30 s loop come 28 s apart.
  it('59s: under a minute the slack is a quarter of a second (54 s ago is not due, 58.9 s is)', async () => {
    expect((await due('59s', 54 * SECOND)).ran).toBe(false);
    expect((await due('59s', 58.9 * SECOND)).ran).toBe(true);
  });
});

