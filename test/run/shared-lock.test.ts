import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, runs, sandbox, start, waitFor } from '../helpers.js';
import { serve } from '../serve/serve-helpers.js';

// Jobs that must never run at the same time share one lock (--lock-file). One that is not
// due (its --min-interval, a pause, no request for --on-request) decides so before taking
// that lock, so that it never takes the lock from a due job of the same lock just to skip.
// Shown deterministically: while another job holds the shared lock, a job that is not due
// says so (exit 0, the log's reason), where a lookup under the lock would find it held (-E 3).
describe('jobs sharing a lock (--lock-file)', () => {
  it('a job that is not due never takes the shared lock; a due one does', async () => {
    const box = sandbox();
    const shared = ['--lock-file', box.path('shared.lock')];
    expect(await cronguard([...shared, '-n', 'report', '--min-interval', '1h', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(await cronguard(['disable', 'paused'], box.env)).toMatchObject({ code: 0 });
    const backup = start([...shared, '-n', 'backup', '--', fixture('hold.sh'), box.path('backup'), box.path('go')], box.env);
    await waitFor(() => lines(box.path('backup')).length === 1, 'backup to hold the shared lock');

    const report = await cronguard([...shared, '-v', '-E', '3', '-n', 'report', '--min-interval', '1h', '--', 'true'], box.env);
    expect(report.code).toBe(0);
    expect(report.stderr).toMatch(/report: the last run started \S+ ago, less than --min-interval 1h\S*; next due at \S+; skipping with exit 0\n/);
    expect(report.stderr).not.toContain('shared.lock is held');
    expect(await cronguard([...shared, '-E', '3', '-n', 'paused', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(await cronguard([...shared, '-E', '3', '-n', 'asked', '--on-request', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });

    // Due: a request, or a job without rules. It takes the lock, finds it held, skips (-E 3).
    expect(await cronguard(['request', 'report'], box.env)).toMatchObject({ code: 0 });
    expect(await cronguard([...shared, '-E', '3', '-n', 'report', '--min-interval', '1h', '--', 'true'], box.env)).toMatchObject({ code: 3 });
    expect(await cronguard([...shared, '-E', '3', '-n', 'other', '--', 'true'], box.env)).toMatchObject({ code: 3 });

    // Who holds the shared lock, where a person looks: status, requests, the web page.
    const jobs = JSON.parse((await cronguard(['status', '--json'], box.env)).stdout) as { job: string; lock_held_by: string | null }[];
    expect(Object.fromEntries(jobs.map((j) => [j.job, j.lock_held_by]))).toEqual({ backup: null, other: null, paused: null, report: 'backup' });
    expect((await cronguard(['status'], box.env)).stdout).toMatch(/^report +idle, lock: backup /m);
    expect((await cronguard(['status', 'report'], box.env)).stdout).toMatch(/^ {2}shared lock +held by backup, which runs now$/m);
    expect((await cronguard(['requests'], box.env)).stdout).toMatch(/^1 +report +pending, lock: backup /m);
    const server = await serve(['-q'], box.env);
    expect(await (await server.get('/')).text()).toMatch(/<span class="state idle">idle<\/span> <span class="muted">lock held by <a href="\/jobs\/backup">backup<\/a><\/span>/);

    release(box.path('go'));
    expect(await backup.done).toMatchObject({ code: 0, stderr: '' });
    // Its lock free again, the requested run runs.
    expect(await cronguard([...shared, '-E', '3', '-n', 'report', '--min-interval', '1h', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(runs(box.stateDir).filter((r) => r.job === 'report').map((r) => r.trigger)).toEqual(['cron', 'request']);
  });

  // --replace stops the running copy only for a run that is due: a paused job's invocation
  // leaves the copy alone, under a shared lock or its own.
  it.each([['a shared lock', true], ['its own lock', false]])('a paused job does not stop its running copy with --replace (%s)', async (_, isShared) => {
    const box = sandbox();
    const job = [...(isShared ? ['--lock-file', box.path('shared.lock')] : []), '-n', 'report'];
    const copy = start([...job, '--', fixture('hold.sh'), box.path('copy'), box.path('go')], box.env);
    await waitFor(() => lines(box.path('copy')).length === 1, 'the copy to hold the lock');
    expect(await cronguard(['disable', 'report'], box.env)).toMatchObject({ code: 0 });
    expect(await cronguard([...job, '--replace', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    release(box.path('go'));
    expect(await copy.done).toMatchObject({ code: 0, stderr: '' });
    expect(runs(box.stateDir).map((r) => [r.status, r.error])).toEqual([['succeeded', null]]);
  });

  it('a job of its own lock keeps the old order: the lock first', async () => {
    const box = sandbox();
    expect(await cronguard(['-n', 'solo', '--min-interval', '1h', '--', 'true'], box.env)).toMatchObject({ code: 0 });
    const holder = start(['-n', 'solo-hold', '--lock-file', `${box.lockDir}/solo.lock`, '--', fixture('hold.sh'), box.path('h'), box.path('go')], box.env);
    await waitFor(() => lines(box.path('h')).length === 1, 'the holder to start');
    expect(await cronguard(['-E', '3', '-n', 'solo', '--min-interval', '1h', '--', 'true'], box.env)).toMatchObject({ code: 3 });
    release(box.path('go'));
    expect(await holder.done).toMatchObject({ code: 0 });
  });
});
