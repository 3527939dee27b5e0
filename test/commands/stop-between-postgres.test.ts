import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cronguard, lines, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// An invocation between two runs (a retry's delay, a loop's wait) has no `running` row but
// lives on, holds the lock and starts the command again. `stop NAME` found "nothing to stop"
// (2) and the retry came anyway; --replace skipped on the lock such a copy held. From a
// breaker of issue 25 item 3/7.
describe.each(STORES)('stop between runs (%s)', (kind) => {
  // The command appends a line to `marks` each time it starts, and fails.
  const failing = (marks: string) => ['sh', '-c', `echo ran >> '${marks}'; exit 3`];
  // The latest run's status; null before the run log exists (a database's tables come with
  // the first run).
  const latest = async (box: ReturnType<typeof storeBox>) => (await box.runs().catch(() => []))[0]?.status ?? null;

  it('stop NAME during a retry delay ends the invocation: no further attempt', async () => {
    const box = storeBox(kind);
    const job = box.job('retrying');
    const marks = box.path('marks');
    const run = start(['-n', job, '--retries', '2', '--retry-delay', '1h', '--', ...failing(marks)], box.env);
    await waitFor(async () => (await latest(box)) === 'failed', 'the first attempt to fail');
    const stopped = await cronguard(['stop', job], box.env);
    expect(stopped).toMatchObject({ code: 0, stdout: '' });
    expect(stopped.stderr).toMatch(new RegExp(`^cronguard stop: run \\d+ \\(${job} on ${hostname()}\\) failed`));
    const ended = await run.done;
    expect(ended.code).toBe(143);
    expect(ended.stderr).toContain(`${job}: stopped by SIGTERM while waiting to retry`);
    expect(lines(marks)).toEqual(['ran']);
    expect((await box.runs()).map((r) => r.status)).toEqual(['failed']);
    // Nothing is left to stop.
    expect(await cronguard(['stop', job], box.env)).toMatchObject({ code: 2 });
  });

  it('stop RUN_ID of the attempt that failed ends the invocation too', async () => {
    const box = storeBox(kind);
    const job = box.job('byid');
    const marks = box.path('marks');
    const run = start(['-n', job, '--retries', '1', '--retry-delay', '1h', '--', ...failing(marks)], box.env);
    await waitFor(async () => (await latest(box)) === 'failed', 'the first attempt to fail');
    const [row] = await box.runs();
    expect(await cronguard(['stop', String(row?.id)], box.env)).toMatchObject({ code: 0 });
    expect((await run.done).code).toBe(143);
    expect(lines(marks)).toEqual(['ran']);
  });

  it('stop NAME while a loop waits for its next run ends the loop', async () => {
    const box = storeBox(kind);
    const job = box.job('loop');
    const marks = box.path('marks');
    const run = start(['-n', job, '--every', '1h', '--for', '2h', '--', 'sh', '-c', `echo ran >> '${marks}'`], box.env);
    await waitFor(async () => (await latest(box)) === 'succeeded', 'the first run to end');
    expect(await cronguard(['stop', job], box.env)).toMatchObject({ code: 0 });
    const ended = await run.done;
    expect(ended.code).toBe(143);
    expect(ended.stderr).toContain(`${job}: stopped by SIGTERM while waiting for the next run`);
    expect(lines(marks)).toEqual(['ran']);
  });

  it('--replace replaces a loop that waits for its next run (it skipped on its lock)', async () => {
    const box = storeBox(kind);
    const job = box.job('reloop');
    const marks = box.path('marks');
    const old = start(['-n', job, '--every', '1h', '--for', '2h', '--', 'sh', '-c', `echo old >> '${marks}'`], box.env);
    await waitFor(async () => (await latest(box)) === 'succeeded', 'the loop\'s first run to end');
    const replacing = await cronguard(['-n', job, '--replace', '--', 'sh', '-c', `echo new >> '${marks}'`], box.env);
    expect(replacing.code).toBe(0);
    expect((await old.done).code).toBe(143);
    expect(lines(marks)).toEqual(['old', 'new']);
    expect((await box.runs()).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });
});
