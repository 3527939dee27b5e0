import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fixture, isAlive, runs, sandbox, start, waitFor } from '../helpers.js';

const read = (file: string) => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
};

describe('signals sent to cronguard reach the command', () => {
  it.each(['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'] as const)('forwards %s to the process group', async (signal) => {
    const box = sandbox();
    const log = box.path('signals');
    const run = start(['-n', 'fwd', '--', fixture('signal.sh'), log], box.env);
    await waitFor(() => read(log).includes('ready'), 'the fixture to start');
    run.child.kill(signal);
    const result = await run.done;
    expect(read(log)).toContain(signal.slice(3));
    // The shell may report its killed foreground sleep; cronguard itself says nothing.
    expect(result).toMatchObject({ code: 0, stdout: '' });
    expect(result.stderr).not.toMatch(/cronguard/);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'succeeded', exit_code: 0 });
  });

  it.each([
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const)('exits 128+N when the forwarded %s kills the command', async (signal, code) => {
    const box = sandbox();
    const log = box.path('signals');
    const run = start(['-n', 'die', '--', fixture('signal.sh'), log, 'die'], box.env);
    await waitFor(() => read(log).includes('ready') && !!runs(box.stateDir)[0]?.child_pid, 'the fixture to start');
    const pid = runs(box.stateDir)[0]?.child_pid as number;
    run.child.kill(signal);
    const result = await run.done;
    expect(result.code).toBe(code);
    expect(result.stderr).toMatch(new RegExp(`^cronguard: die: killed by ${signal} \\(forwarded by cronguard\\) after .* \\(run 1; cronguard logs 1\\)\n$`));
    expect(isAlive(pid)).toBe(false);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'killed', signal, exit_code: null });
  });
});

// A timeout runs from the spawn and cannot wait for a barrier: where the command must be set
// up (traps, children, output) before it fires, the timeout is 2 s, far more than a shell
// needs even on a loaded machine. Elapsed time is only checked from below.
describe('--timeout', () => {
  it('stops the whole process tree and exits 124', async () => {
    const box = sandbox();
    const pids = box.path('pids');
    const result = await start(['-n', 'slow', '-t', '2s', '--', fixture('tree.sh'), pids], box.env).done;
    expect(result.code).toBe(124);
    expect(result.stderr).toBe('cronguard: slow: timed out after 2s: sent SIGTERM to its process group (run 1; cronguard logs 1)\n');
    const members = read(pids).trim().split('\n').map(Number);
    expect(members).toHaveLength(3);
    for (const pid of members) expect(isAlive(pid)).toBe(false);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'timed_out', signal: 'SIGTERM' });
  });

  it("leaves nothing of sh -c 'sleep N & sleep N' behind", async () => {
    const box = sandbox();
    // Not a duration any fixture sleeps (tree.sh sleeps 100), since other test files run
    // alongside.
    const marker = String(10_000 + Math.floor(Math.random() * 80_000));
    const result = await start(['-t', '2s', '--', 'sh', '-c', `sleep ${marker} & sleep ${marker}`], box.env).done;
    expect(result.code).toBe(124);
    const { execFileSync } = await import('node:child_process');
    const left = (() => {
      try {
        return execFileSync('pgrep', ['-x', '-f', `sleep ${marker}`]).toString();
      } catch {
        return '';
      }
    })();
    expect(left).toBe('');
  });

  it('escalates to SIGKILL after --kill-after when the tree ignores the signal', async () => {
    const box = sandbox();
    const pids = box.path('pids');
    const started = Date.now();
    const result = await start(
      ['-n', 'stubborn', '-t', '2s', '--kill-after', '400ms', '--', fixture('tree.sh'), pids, 'trap'],
      box.env,
    ).done;
    const elapsed = Date.now() - started;
    expect(result.code).toBe(124);
    expect(elapsed).toBeGreaterThanOrEqual(2400);
    expect(result.stderr).toMatch(/^cronguard: stubborn: timed out after 2s: sent SIGTERM to its process group, then SIGKILL after 400ms \(run 1; cronguard logs 1\)\n$/);
    const members = read(pids).trim().split('\n').map(Number);
    expect(members).toHaveLength(3);
    for (const pid of members) expect(isAlive(pid)).toBe(false);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'timed_out', signal: 'SIGKILL' });
  });

  it('sends --kill-signal instead of TERM', async () => {
    const box = sandbox();
    const log = box.path('signals');
    const result = await start(
      ['-n', 'int', '-t', '2s', '--kill-signal', 'INT', '--', fixture('signal.sh'), log],
      box.env,
    ).done;
    expect(result.code).toBe(124);
    expect(read(log)).toContain('INT');
  });

  it('does not fire when the command finishes in time', async () => {
    const box = sandbox();
    // An hour: the timer must neither fire nor keep cronguard alive once the command is done.
    const result = await start(['-t', '1h', '--', 'true'], box.env).done;
    expect(result).toMatchObject({ code: 0, stderr: '' });
  });
});
