import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { BINARY, cronguard, fixture, runs, sandbox } from '../helpers.js';

// How cronguard prints a duration (formatDuration): 850ms, 1.25s, 4m05s.
const DURATION = '[0-9.]+m?s';

describe('exit codes and the run row', () => {
  it.each([0, 1, 3, 42, 255])('passes exit code %d through and records it', async (code) => {
    const box = sandbox();
    const result = await cronguard(['-n', 'j', '--', fixture('exit.sh'), String(code)], box.env);
    // A failure speaks once, even when the command printed nothing; success is silent.
    const summary = code === 0 ? '' : `cronguard: j: failed with exit ${code} after ${DURATION} \\(run 1; cronguard logs 1\\)\n`;
    expect(result).toMatchObject({ code, stdout: '' });
    expect(result.stderr).toMatch(new RegExp(`^${summary}$`));
    const [row] = runs(box.stateDir);
    expect(row).toMatchObject({
      job: 'j',
      status: code === 0 ? 'succeeded' : 'failed',
      exit_code: code,
      signal: null,
      trigger: 'cron',
      attempt: 1,
      overlaps: 0,
      error: null,
    });
  });

  it('fills every column of the contract', async () => {
    const box = sandbox();
    await cronguard(['-n', 'cols', '--', 'sh', '-c', 'echo out; echo err >&2'], box.env);
    const [row] = runs(box.stateDir);
    expect(Object.keys(row as object).sort()).toEqual(
      [
        'id', 'job', 'status', 'trigger', 'attempt', 'host', 'pid', 'child_pid', 'username', 'command',
        'started_at', 'finished_at', 'duration_ms', 'exit_code', 'signal', 'output', 'output_truncated',
        'overlaps', 'request_id', 'error', 'tick', 'lock_backend', 'lock_key', 'run_key', 'invoked_at', 'wrapper_start',
        'slot', 'max_running',
      ].sort(),
    );
    expect(row).toMatchObject({
      status: 'succeeded',
      host: execFileSync('hostname').toString().trim(),
      command: "sh -c 'echo out; echo err >&2'",
      output: 'out\nerr\n',
      output_truncated: 0,
      request_id: null,
      lock_backend: 'flock',
      lock_key: `${box.lockDir}/cols.lock`,
    });
    // Not run from a terminal, so it belongs to the minute it started in.
    expect(row?.tick).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z$/);
    expect(row?.pid).toBeGreaterThan(0);
    expect(row?.child_pid).toBeGreaterThan(0);
    expect(row?.username).toBeTruthy();
    expect(row?.started_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(row?.finished_at as string)).toBeGreaterThanOrEqual(Date.parse(row?.started_at as string));
    expect(row?.duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('exits 128+N when the command is killed by a signal, and says so', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'k', '--', 'sh', '-c', 'kill -KILL $$'], box.env);
    expect(result.code).toBe(137);
    expect(result.stderr).toMatch(new RegExp(`^cronguard: k: killed by SIGKILL after ${DURATION} \\(run 1; cronguard logs 1\\)\n$`));
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'killed', signal: 'SIGKILL', exit_code: null });
  });

  it('runs a shell string with -c', async () => {
    const box = sandbox();
    const result = await cronguard(['-c', 'echo "$((6 * 7))"; exit 5'], box.env);
    expect(result).toMatchObject({ code: 5, stdout: '42\n' });
    expect(runs(box.stateDir)[0]?.job).toMatch(/^sh-[0-9a-f]{8}$/);
  });

  it('records trigger manual when run from a terminal', async () => {
    const box = sandbox();
    const command = `${process.execPath} ${BINARY} -n tty -- true`;
    execFileSync('script', ['-qec', command, '/dev/null'], { env: box.env });
    expect(runs(box.stateDir)[0]).toMatchObject({ trigger: 'manual', status: 'succeeded' });
  });

  it('prints nothing of its own on success and keeps no log with --no-log', async () => {
    const box = sandbox();
    const result = await cronguard(['--no-log', '-n', 'quiet', '--', 'true'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(runs(box.stateDir)).toEqual([]);
  });

  it('explains its decisions on stderr with -v', async () => {
    const box = sandbox();
    const result = await cronguard(['-v', '-n', 'talk', '--', 'true'], box.env);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/talk: holding flock .*talk\.lock/);
    expect(result.stderr).toMatch(/run log in /);
    expect(result.stderr).toMatch(/talk: succeeded, exit 0/);
  });
});
