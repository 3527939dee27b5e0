import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { type SeedRun, STORES, storeBox } from '../stores.js';

const DAY = 86_400_000;
const ago = (ms: number) => new Date(Date.now() - ms);
const ids = (rows: { job: string; id: number }[], job: string) => rows.filter((r) => r.job === job).map((r) => r.id);

describe.each(STORES)('prune (%s)', (kind) => {
  it('deletes finished runs older than --older-than, keeping each job\'s latest N, its latest success and running rows', async () => {
    const box = storeBox(kind);
    const [a, b] = [box.job('a'), box.job('b')];
    await cronguard(['migrate'], box.env);
    const seed: SeedRun[] = [
      { job: a, status: 'succeeded', startedAt: ago(50 * DAY), durationMs: 1 },
      ...[49, 48, 47, 46].map((d) => ({ job: a, status: 'failed', startedAt: ago(d * DAY), durationMs: 1 })),
      { job: a, status: 'running', startedAt: ago(45 * DAY), durationMs: null },
      { job: a, status: 'succeeded', startedAt: ago(DAY), durationMs: 1 },
      ...[40, 39, 38].map((d) => ({ job: b, status: 'succeeded', startedAt: ago(d * DAY), durationMs: 1 })),
    ];
    await box.insertRuns(seed);
    const before = await box.runs();
    const result = await cronguard(['prune', '--older-than', '30d', '--keep', '2'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: '' });
    expect(result.stderr).toBe('cronguard: pruned 6 runs and 0 requests older than 30d00h (each job keeps its latest 2 and its latest success)\n');
    const after = await box.runs();
    const aIds = ids(before, a);
    // a's latest two (the running row among them) stay; its old success goes, as a later one exists.
    expect(ids(after, a)).toEqual([aIds[5], aIds[6]]);
    expect(ids(after, b)).toEqual(ids(before, b).slice(1));
    const totals = JSON.parse((await cronguard(['status', a, '--json'], box.env)).stdout)[0].runs_total;
    // MySQL counts only the runs cronguard records (it has no trigger: docs/fleet-mysql.md, "Where MySQL
    // differs"); these were inserted by hand, so it has none to keep.
    expect(totals).toEqual(kind === 'mysql' ? {} : { succeeded: 2, failed: 4 });
  });

  it('keeps a job\'s latest success however old, and drops finished requests that ended before the cut', async () => {
    const box = storeBox(kind);
    const job = box.job('rare');
    await cronguard(['migrate'], box.env);
    await box.insertRuns([
      { job, status: 'succeeded', startedAt: ago(200 * DAY), durationMs: 1 },
      ...[100, 99].map((d) => ({ job, status: 'failed', startedAt: ago(d * DAY), durationMs: 1 })),
    ]);
    const pending = await box.request(job);
    const cancelled = await box.request(job);
    await cronguard(['request', '--cancel', String(cancelled)], box.env);
    const json = await cronguard(['prune', '--older-than', '0s', '--keep', '0', '--json'], box.env);
    expect(JSON.parse(json.stdout)).toMatchObject({ runs: 2, requests: 1, keep: 0 });
    expect((await box.runs()).map((r) => r.status)).toEqual(['succeeded']);
    expect((await box.requests()).map((r) => r.id)).toEqual([pending]);
  });

  it('refuses bad input with one line and exit 64, deleting nothing', async () => {
    const box = storeBox(kind);
    await cronguard(['-n', box.job('kept'), '--', 'true'], box.env);
    for (const args of [['--keep', '-1', '--older-than', '1d'], ['--keep', 'x', '--older-than', '1d'], [], ['--older-than', 'ever']]) {
      const result = await cronguard(['prune', ...args], box.env);
      expect(result.code, args.join(' ')).toBe(64);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
    }
    expect(await box.runs()).toHaveLength(1);
  });
});

describe.each(STORES)('automatic prune (%s)', (kind) => {
  const old = (job: string, n: number): SeedRun[] =>
    Array.from({ length: n }, (_, i) => ({ job, status: 'succeeded', startedAt: ago((200 - i) * DAY), durationMs: 1 }));

  it('a run prunes past CRONGUARD_RETENTION (default 90 days) after it ends, at most about once a day for the whole log', async () => {
    const box = storeBox(kind);
    const [gone, job] = [box.job('gone'), box.job('daily')];
    await cronguard(['migrate'], box.env);
    await box.insertRuns(old(gone, 15));
    const first = await cronguard(['-n', job, '-v', '--', 'true'], box.env);
    expect(first.stderr).toMatch(/pruned 5 runs and 0 requests older than/);
    expect((await box.runs()).filter((r) => r.job === gone)).toHaveLength(10);
    // The next runs of the day neither prune nor ask: not with the stamp, nor (another host,
    // or the stamp lost) with the log's own record.
    await box.insertRuns(old(gone, 5));
    await cronguard(['-n', job, '--', 'true'], box.env);
    const stamps = readdirSync(box.stateDir).filter((f) => f.startsWith('prune-'));
    expect(stamps).toHaveLength(1);
    rmSync(join(box.stateDir, stamps[0] as string));
    await cronguard(['-n', job, '--', 'true'], box.env);
    expect((await box.runs()).filter((r) => r.job === gone)).toHaveLength(15);
    expect(existsSync(join(box.stateDir, stamps[0] as string))).toBe(true);
  });

  it('CRONGUARD_RETENTION=off keeps everything; under a day or malformed is refused (64) before anything runs', async () => {
    const box = storeBox(kind);
    const [gone, job] = [box.job('gone'), box.job('kept')];
    await cronguard(['migrate'], box.env);
    await box.insertRuns(old(gone, 12));
    expect((await cronguard(['-n', job, '--', 'true'], { ...box.env, CRONGUARD_RETENTION: 'off' })).code).toBe(0);
    expect((await box.runs()).filter((r) => r.job === gone)).toHaveLength(12);
    for (const value of ['12h', 'forever']) {
      const result = await cronguard(['-n', job, '--', 'true'], { ...box.env, CRONGUARD_RETENTION: value });
      expect(result.code, value).toBe(64);
      expect(result.stderr).toMatch(/^cronguard: \$CRONGUARD_RETENTION: /);
    }
    expect((await box.runs()).filter((r) => r.job === job)).toHaveLength(1);
  });
});
