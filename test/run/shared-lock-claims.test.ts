import { existsSync } from 'node:fs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { cronguard, fixture, lines, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// A job that shares a lock (--lock-file) and runs only for requests asks the log before it
// takes that lock. Requests its killed wrapper left `running` must still be settled by its
// next invocation, as they are for a job of its own lock: `request --wait` must not hang
// until someone makes another request.
describe.each(STORES)('a job sharing a lock whose wrapper was killed with its requests claimed (%s)', (kind) => {
  it('SIGKILL during --retry-delay: the next invocation settles the request', async () => {
    const box = storeBox(kind);
    const job = box.job('sharedkilled');
    const shared = ['-l', 'flock', '--lock-file', box.path('shared.lock')];
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const waiter = start(['request', job, '--wait'], box.env);
    onTestFinished(() => void waiter.child.kill());
    await waitFor(async () => (await box.requests()).length === 1, 'the request');
    const log = box.path('attempts');
    const run = start([...shared, '-n', job, '--on-request', '--retries', '3', '--retry-delay', '1h', '--', fixture('flaky.sh'), log, '99', '3'], box.env);
    let said = '';
    run.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => said.includes('retrying in 1h00m'), 'the first attempt to fail');
    run.child.kill('SIGKILL');
    await run.done;

    expect(await cronguard([...shared, '-n', job, '-w', '1m', '--on-request', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(await box.requests()).toEqual([expect.objectContaining({ status: 'failed', exit_code: 3 })]);
    expect((await waiter.done).code).toBe(3);
    expect(lines(log)).toHaveLength(1);
  });

  it('SIGKILL while its command runs: the next invocation abandons the run and fails the request', async () => {
    const box = storeBox(kind);
    const job = box.job('sharedmid');
    const shared = ['-l', 'flock', '--lock-file', box.path('shared.lock')];
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    await box.request(job, []);
    // The command outlives its wrapper a moment, holding the lock (-w below waits for it).
    const run = start([...shared, '-n', job, '--on-request', '--', 'sh', '-c', 'echo started >> "$0"; exec sleep 1', box.path('mid')], box.env);
    await waitFor(() => lines(box.path('mid')).length === 1, 'the command to start');
    run.child.kill('SIGKILL');
    await run.done;

    expect(await cronguard([...shared, '-n', job, '-w', '1m', '--on-request', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect((await box.runs()).map((r) => r.status)).toEqual(['abandoned']);
    expect(await box.requests()).toEqual([expect.objectContaining({ status: 'failed' })]);
  });

  it('--min-interval: a run killed midway does not count, so the job is due as its admission says', async () => {
    const box = storeBox(kind);
    const job = box.job('sharedinterval');
    const shared = ['-l', 'flock', '--lock-file', box.path('shared.lock')];
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    await box.insertRuns([{ job, status: 'succeeded', startedAt: new Date(Date.now() - 2 * 3_600_000), durationMs: 1000 }]);
    const run = start([...shared, '-n', job, '--min-interval', '1h', '--', 'sh', '-c', 'echo started >> "$0"; exec sleep 1', box.path('mid')], box.env);
    await waitFor(() => lines(box.path('mid')).length === 1, 'the command to start');
    run.child.kill('SIGKILL');
    await run.done;

    const ran = box.path('ran');
    expect(await cronguard([...shared, '-n', job, '-w', '1m', '--min-interval', '1h', '--', 'touch', ran], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(ran)).toBe(true);
    expect((await box.runs()).map((r) => r.status)).toEqual(['succeeded', 'abandoned', 'succeeded']);
  });
});
