import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, isAlive, lines, release, start, waitFor } from '../helpers.js';
import { pgRuns, pgSandbox } from '../pg-helpers.js';

// Without setpriv on the machine (Alpine, minimal images): a mount namespace where the
// binary is an empty file.
const withoutSetpriv = process.geteuid?.() === 0 ? ['unshare', '-m', 'sh', '-c', 'mount --bind /dev/null /usr/bin/setpriv && exec "$@"', 'x'] : [];

describe('a wrapper SIGKILLed under a lock that dies with it', () => {
  it.each([
    ['the postgres lock', [], []],
    ['the postgres lock, no setpriv on the machine', [], withoutSetpriv],
  ])('%s: the whole process group dies, foreground children included, before another instance runs', async (_what, args, prefix) => {
    const box = pgSandbox();
    const job = box.job('death');
    const pids = box.path('pids');
    const barrier = box.path('never');
    const first = start([...args, '-n', job, '--', fixture('foreground.sh'), pids, barrier], box.env, prefix);
    await waitFor(() => lines(pids).length === 1, 'the work to start');
    const worker = Number(lines(pids)[0]);
    first.child.kill('SIGKILL');
    await first.done;
    await waitFor(() => !isAlive(worker), 'the orphaned work to be killed');
    expect(existsSync(`${pids}.after`)).toBe(false);
    const second = await cronguard(['-n', job, '--', 'true'], box.env);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
    release(barrier);
  });
});
