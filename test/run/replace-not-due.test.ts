import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, runs, sandbox, start, waitFor } from '../helpers.js';

// --replace stops the running copy only for a run that is due: one that its interval, its
// requests or its schedule would refuse leaves the copy alone (the copy's own start is the
// last run an interval counts from).
describe('--replace for a job that is not due', () => {
  it.each([
    ['--min-interval 1h', ['--min-interval', '1h'], [] as string[]],
    ['--on-request without a request', ['--on-request'], [] as string[]],
    ['--scheduled not firing', ['--scheduled'], ['schedule', 'report', '--cron', '0 0 1 1 *']],
  ])('%s: the running copy is not stopped', async (_, flags, setup) => {
    const box = sandbox();
    if (setup.length > 0) expect(await cronguard(setup, box.env)).toMatchObject({ code: 0 });
    const job = ['-n', 'report', ...(flags[0] === '--min-interval' ? flags : [])];
    const copy = start([...job, '--', fixture('hold.sh'), box.path('copy'), box.path('go')], box.env);
    await waitFor(() => lines(box.path('copy')).length === 1, 'the copy to hold the lock');
    const replacer = await cronguard(['-n', 'report', ...flags, '--replace', '--', 'true'], box.env);
    release(box.path('go'));
    const old = await copy.done;
    expect(replacer).toMatchObject({ code: 0, stderr: '' });
    expect(old).toMatchObject({ code: 0, stderr: '' });
    expect(runs(box.stateDir).map((r) => [r.status, r.error])).toEqual([['succeeded', null]]);
  });
});

// A signal to a --replace invocation ends its wait for the old copy's end at once, as it ends
// a wait for the lock: one line, 128+N, nothing run. The old copy, asked to stop, still ends.
describe('a signal while --replace waits for the old copy', () => {
  it('ends the wait before the old copy has ended', async () => {
    const box = sandbox();
    const marks = box.path('marks');
    const go = box.path('go');
    // Asked to stop, the old copy holds on until released.
    const script = `trap 'echo term >> ${marks}; while [ ! -e ${go} ]; do sleep 0.05; done; exit 0' TERM; echo up >> ${marks}; while :; do sleep 0.05; done`;
    const copy = start(['-n', 'report', '--kill-after', '1h', '--', 'sh', '-c', script], box.env);
    await waitFor(() => lines(marks).includes('up'), 'the old copy to start');
    const replacer = start(['-n', 'report', '--replace', '--', 'true'], box.env);
    await waitFor(() => lines(marks).includes('term'), 'the old copy to be asked to stop');
    replacer.child.kill('SIGTERM');
    const replaced = await replacer.done;
    expect(lines(marks)).toEqual(['up', 'term']);
    expect(replaced.code).toBe(143);
    expect(replaced.stderr).toMatch(/^cronguard: report: stopped by SIGTERM before the command started; nothing ran\n$/);
    release(go);
    await copy.done;
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['killed']);
  });
});
