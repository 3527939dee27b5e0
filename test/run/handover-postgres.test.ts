import { describe, expect, it } from 'vitest';
import { collected, cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// `* * * * * cronguard --on-request --for 1m`: each minute's invocation takes over from the
// loop of the minute before, whose window ends as its own begins.
describe.each(STORES)('a loop hands over to the next (%s)', (kind) => {
  it('the next invocation waits for the ending loop\'s lock; a request made in between is served once, by it', async () => {
    const box = storeBox(kind);
    const job = box.job('handover');
    const log = box.path('log');
    const barrier = box.path('go');
    const command = ['--', fixture('hold-args.sh'), log, barrier];
    await cronguard(['migrate'], box.env);
    const ending = start(['-n', job, '--on-request', '--for', '2s', ...command], box.env);
    await box.request(job, ['first']);
    await waitFor(() => lines(log).some((l) => l.endsWith(' first')), 'the ending loop to serve the first request');
    // Its window closes, at the latest, 2 s after the run began: the run holds the lock past it.
    const windowClosed = Date.now() + 2000;
    const next = start(['-v', '-n', job, '--on-request', '--for', '1h', ...command], box.env);
    const said = collected(next);
    await waitFor(() => /is held; waiting up to 10s for it\n/.test(said.stderr()), 'the next invocation to wait for the lock');
    await box.request(job, ['second']);
    await waitFor(() => Date.now() > windowClosed, 'the ending loop\'s window to close');
    release(barrier);
    expect((await ending.done).code).toBe(0);
    await waitFor(() => lines(log).some((l) => l.endsWith(' second')), 'the next loop to serve the second request');
    await waitFor(async () => (await box.requests()).every((r) => r.status === 'succeeded'), 'both requests to end');
    next.child.kill('SIGTERM');
    expect((await next.done).code).toBe(143);
    const runs = await box.runs();
    expect(runs.map((r) => [r.pid, r.trigger, r.status])).toEqual([
      [ending.child.pid, 'request', 'succeeded'],
      [next.child.pid, 'request', 'succeeded'],
    ]);
    expect(lines(log).filter((l) => l.startsWith('start')).map((l) => l.split(' ')[2])).toEqual(['first', 'second']);
  });

  it('a holder that does not end within the hand-over leaves the next invocation to skip, counted', async () => {
    const box = storeBox(kind);
    const job = box.job('stuck');
    const log = box.path('log');
    const barrier = box.path('go');
    const holder = start(['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length === 1, 'the holder to start');
    const skipped = await cronguard(['-v', '-n', job, '--on-request', '--for', '1s', '--', 'true'], box.env);
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toMatch(/is held; waiting up to 1s for it\n(.*\n)*.*is held by .*; skipping with exit 0\n/);
    release(barrier);
    expect((await holder.done).code).toBe(0);
    expect((await box.runs()).map((r) => r.overlaps)).toEqual([1]);
  });
});
