import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, inTerminal, lines, release, sandbox, start, waitFor } from '../helpers.js';

// A person who runs a job by hand while cron's copy holds the lock is told it did not run,
// and by whom; cron's own skips stay silent.
describe('a skip because the lock is held', () => {
  it('is one line on a terminal naming the holder, and silence under cron', async () => {
    const box = sandbox();
    const holding = start(['-n', 'j', '--', fixture('hold.sh'), box.path('runs'), box.path('go')], box.env);
    await waitFor(() => lines(box.path('runs')).length === 1, 'the first run to start');
    const byHand = await inTerminal(['-n', 'j', '--', 'touch', box.path('second')], box.env);
    expect(byHand.code).toBe(0);
    expect(byHand.stdout).toMatch(
      new RegExp(`^cronguard: j did not run: flock ${box.lockDir}/j\\.lock is held by host \\S+ \\(pid ${holding.child.pid}, run 1, since \\S+\\)\\n$`),
    );
    const withE = await inTerminal(['-E', '3', '-n', 'j', '--', 'true'], box.env);
    expect(withE.code).toBe(3);
    expect(await cronguard(['-n', 'j', '--', 'touch', box.path('second')], box.env)).toMatchObject({ code: 0, stdout: '', stderr: '' });
    release(box.path('go'));
    expect(await holding.done).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(box.path('second'))).toBe(false);
  });
});
