import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fixture, lines, release, runs, type Sandbox, type Started, sandbox, start, waitFor } from '../helpers.js';

// cronguard with its wall clock stepped by `stepMs` once the test creates `file` (see
// clock-step.cjs): what NTP does to a host whose clock drifted, or a VM resumed.
function stepped(box: Sandbox, stepMs: number) {
  const file = box.path('step');
  const env = { ...box.env, NODE_OPTIONS: `--require ${fixture('clock-step.cjs')}`, CRONGUARD_TEST_CLOCK_STEP_FILE: file, CRONGUARD_TEST_CLOCK_STEP_MS: String(stepMs) };
  const step = async () => {
    release(file);
    await waitFor(() => existsSync(`${file}.seen`), 'cronguard to see its clock stepped');
  };
  return { env, file, step };
}

// What a started cronguard has written to stderr so far.
function stderrOf(run: Started): () => string {
  let text = '';
  run.child.stderr?.on('data', (c: Buffer) => (text += c.toString()));
  return () => text;
}

const HOUR = 3_600_000;

// Durations are measured on the monotonic clock: a step of the wall clock neither ends a
// wait (-w) or a loop's window (--for) early, nor makes either last an hour longer.
describe('a wall clock stepped while cronguard measures a duration', () => {
  it('an hour forward during -w 10m: the wait goes on, and the run starts once the holder ends', async () => {
    const box = sandbox();
    const log = box.path('log');
    const barrier = box.path('barrier');
    const holder = start(['-n', 'step', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder\'s command to start');
    const clock = stepped(box, HOUR);
    const waiter = start(['-v', '-w', '10m', '-E', '3', '-n', 'step', '--', 'touch', box.path('ran')], clock.env);
    const said = stderrOf(waiter);
    await waitFor(() => said().includes('waiting up to 10m'), 'the waiter to wait');
    await clock.step();
    // Passing never depends on this pause; it gives a wait counted on the wall clock
    // (retried every 250 ms at most) the time to end, as it did, with -E's 3.
    await new Promise((r) => setTimeout(r, 1000));
    release(barrier);
    expect(await holder.done).toMatchObject({ code: 0, stderr: '' });
    expect((await waiter.done).code).toBe(0);
    expect(existsSync(box.path('ran'))).toBe(true);
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });

  it('an hour back during -w 3s: the wait still ends after 3 s, skipped with -E', async () => {
    const box = sandbox();
    const log = box.path('log');
    const barrier = box.path('barrier');
    const holder = start(['-n', 'back', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder\'s command to start');
    const clock = stepped(box, -HOUR);
    const waiter = start(['-v', '-w', '3s', '-E', '3', '-n', 'back', '--', 'touch', box.path('ran')], clock.env);
    const said = stderrOf(waiter);
    await waitFor(() => said().includes('waiting up to 3s'), 'the waiter to wait');
    // Not waited for: a machine busy enough may let the 3 s pass before the step comes.
    release(clock.file);
    // Counted on the wall clock, the wait would last an hour and three seconds.
    expect((await waiter.done).code).toBe(3);
    expect(existsSync(box.path('ran'))).toBe(false);
    expect(lines(log)).toHaveLength(1);
    release(barrier);
    expect(await holder.done).toMatchObject({ code: 0, stderr: '' });
  });

  it('an hour forward during a loop (--every 100ms --for 10m): the loop goes on running', async () => {
    const box = sandbox();
    const log = box.path('log');
    const clock = stepped(box, HOUR);
    const loop = start(['-n', 'loop', '--every', '100ms', '--for', '10m', '--', 'sh', '-c', `echo run >> ${log}`], clock.env);
    await waitFor(() => lines(log).length > 0, 'the first run');
    await clock.step();
    // Runs after the step: a window counted on the wall clock had ended at it.
    const seen = lines(log).length;
    await waitFor(() => lines(log).length >= seen + 3, 'three more runs after the step');
    loop.child.kill('SIGTERM');
    const ended = await loop.done;
    expect(ended.code).toBe(143);
    expect(ended.stderr).toMatch(/^cronguard: loop: .*SIGTERM/);
  });
});
