import { describe, expect, it } from 'vitest';
import { fixture, isAlive, lines, release, runs, sandbox, start, waitFor } from '../helpers.js';

describe('--kill-after', () => {
  it('waits as long as it says, even past the 24.8 days a timer can hold', async () => {
    const box = sandbox();
    const log = box.path('record');
    const barrier = box.path('go');
    const run = start(['-n', 'patient', '-t', '1s', '--kill-after', '30d', '--', fixture('stubborn.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).includes('term'), 'the timeout to send TERM');
    const pid = Number(lines(log)[0]?.split(' ')[1]);
    // Not SIGKILLed right after the TERM: it is still there until the test lets it end.
    expect(isAlive(pid)).toBe(true);
    release(barrier);
    const result = await run.done;
    expect(result.code).toBe(124);
    expect(lines(log).at(-1)).toBe(`end ${pid}`);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'timed_out', signal: null, exit_code: 0 });
  });
});
