import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunRow } from '../../src/store/types.js';
import { collected, cronguard, fixture, inTerminal, release, runs, type Sandbox, sandbox, start, waitFor } from '../helpers.js';

// The job's running row, once its command has started (the log may be mid-creation).
async function runningRow(box: Sandbox): Promise<RunRow> {
  const find = () => {
    try {
      return runs(box.stateDir).find((r) => r.status === 'running' && r.child_pid !== null);
    } catch {
      return undefined;
    }
  };
  await waitFor(() => find() !== undefined, 'the job to start');
  return find() as RunRow;
}

const liveFile = (box: Sandbox, row: RunRow) => join(box.stateDir, 'live', (row.run_key as string).replaceAll('/', '_'));

describe('cronguard logs', () => {
  it('prints the captured output of a run by id, and of the latest run by name', async () => {
    const box = sandbox();
    await cronguard(['-n', 'j', '--', 'sh', '-c', 'echo one; echo two >&2'], box.env);
    await cronguard(['-n', 'j', '--', 'echo', 'latest'], box.env);
    expect(await cronguard(['logs', '1'], box.env)).toMatchObject({ code: 0, stdout: 'one\ntwo\n', stderr: '' });
    expect(await cronguard(['logs', 'j'], box.env)).toMatchObject({ code: 0, stdout: 'latest\n', stderr: '' });
  });

  it('piped, prints the output alone, byte for byte', async () => {
    const box = sandbox();
    await cronguard(['-n', 'b', '--', 'printf', 'a\\n\\tb\\xc3\\xa9'], box.env);
    expect(await cronguard(['logs', 'b'], box.env)).toMatchObject({ code: 0, stdout: 'a\n\tbé', stderr: '' });
  });

  it('notes truncation on stderr, keeping stdout the output itself', async () => {
    const box = sandbox();
    await cronguard(['--capture', '4', '-n', 't', '--', 'echo', 'abcdefgh'], box.env);
    const result = await cronguard(['logs', 't'], box.env);
    expect(result.stdout).toBe('fgh\n');
    expect(result.stderr).toMatch(/output truncated; this is its last 4 bytes/);
  });

  it.each([
    [['logs', '99'], /^cronguard logs: no run with id 99\n$/],
    [['logs', 'nosuch'], /^cronguard logs: no runs recorded for job nosuch\n$/],
    [['logs', '-f', 'nosuch'], /^cronguard logs: no runs recorded for job nosuch\n$/],
  ])('finds nothing for %j: exit 1', async (args, message) => {
    const box = sandbox();
    await cronguard(['-n', 'j', '--', 'true'], box.env);
    const result = await cronguard(args, box.env);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
  });

  it.each([
    [['logs'], /^cronguard logs: missing required argument 'run' \(see cronguard logs --help\)\n$/],
    [['logs', '../../x'], /^cronguard logs: invalid job name .* \(see cronguard logs --help\)\n$/],
    [['logs', '-f'], /^cronguard logs: missing required argument 'run' \(see cronguard logs --help\)\n$/],
  ])('rejects %j with exit 64', async (args, message) => {
    const box = sandbox();
    await cronguard(['-n', 'j', '--', 'true'], box.env);
    const result = await cronguard(args, box.env);
    expect(result.code).toBe(64);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
  });
});

describe('cronguard logs on a terminal', () => {
  it('shows a header first: run, job, host, coloured status, exit, start in local time (TZ), duration', async () => {
    const box = sandbox();
    await cronguard(['-n', 'j', '--', 'sh', '-c', 'echo out; exit 3'], box.env);
    const [row] = runs(box.stateDir) as [RunRow];
    // +05:45 all year round: an offset no test machine's own zone could fake.
    const shown = await inTerminal(['logs', 'j'], { ...box.env, TZ: 'Asia/Kathmandu', TERM: 'xterm-256color' });
    const local = new Date(Date.parse(row.started_at) + (5 * 60 + 45) * 60_000).toISOString().replace('T', ' ').slice(0, 19);
    expect(shown.code).toBe(0);
    const plain = shown.stdout.replace(/\x1b\[[0-9;]*m/g, '');
    expect(plain).toBe(
      [
        'Run:      1 (cron)',
        'Job:      j',
        `Host:     ${row.host} (pid ${row.pid})`,
        'Status:   failed, exit 3',
        `Started:  ${local} +05:45`,
        `Duration: ${plain.match(/Duration: (\S+)/)?.[1]}`,
        '',
        'out',
        '',
      ].join('\n'),
    );
    expect(shown.stdout).toContain('\x1b[31mfailed');
    const uncoloured = await inTerminal(['logs', 'j'], { ...box.env, TZ: 'America/New_York', NO_COLOR: '1', TERM: 'xterm-256color' });
    expect(uncoloured.stdout).not.toMatch(/\x1b/);
    expect(uncoloured.stdout).toMatch(/^Started: {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d -0[45]:00$/m);
  });

  it('for a running run: the duration so far, then the output so far', async () => {
    const box = sandbox();
    const go = box.path('go');
    const job = start(['-n', 'r', '--', fixture('lines.sh'), go, '2'], box.env);
    const path = liveFile(box, await runningRow(box));
    release(`${go}.1`);
    await waitFor(() => existsSync(path) && readFileSync(path, 'utf8') === 'line 1\n', 'line 1 to be copied');
    const shown = await inTerminal(['logs', 'r'], { ...box.env, NO_COLOR: '1' });
    release(`${go}.2`);
    await job.done;
    expect(shown.stdout).toMatch(/^Status: {3}running\nStarted: .*\nDuration: \S+ so far\n\nline 1\ncronguard logs: run 1 \(r\) is still running; this is its output so far/m);
  });
});

describe('cronguard logs -f (embedded run log)', () => {
  it.each(['symlink', 'fifo'] as const)('refuses a %s planted at the live path: the job writes nothing through it, the follower reads nothing from it', async (planted) => {
    const box = sandbox();
    const go = box.path('go');
    const victim = box.path('victim');
    writeFileSync(victim, 'secret\n');
    const job = start(['-v', '-n', 'h', '--', fixture('lines.sh'), go, '2'], box.env);
    const path = liveFile(box, await runningRow(box));
    mkdirSync(join(box.stateDir, 'live'), { mode: 0o700, recursive: true });
    if (planted === 'symlink') symlinkSync(victim, path);
    else execFileSync('mkfifo', [path]);
    release(`${go}.1`);
    const follower = start(['logs', '-f', 'h'], box.env);
    const seen = collected(follower);
    await waitFor(() => seen.stderr().includes('stored output follows'), 'the follower to refuse the planted file');
    release(`${go}.2`);
    const [ran, followed] = await Promise.all([job.done, follower.done]);
    expect(ran).toMatchObject({ code: 0, stdout: 'line 1\nline 2\n' });
    expect(ran.stderr).toMatch(/h: live copy of the output for logs -f stopped: .* already exists/);
    expect(readFileSync(victim, 'utf8')).toBe('secret\n');
    expect(followed.code).toBe(0);
    expect(followed.stdout).toBe('line 1\nline 2\n');
    const refusal = planted === 'symlink' ? 'is a symbolic link; refusing to follow it' : 'is not a regular file';
    expect(followed.stderr).toContain(refusal);
    expect(followed.stderr).toMatch(/cronguard logs: run 1 \(h\) ended: succeeded, exit 0, after \S+\n$/);
  });

  it('stops quietly (exit 0) when the reader of its output goes away, as with | head', async () => {
    const box = sandbox();
    const go = box.path('go');
    const job = start(['-n', 'p', '--', fixture('lines.sh'), go, '3'], box.env);
    await runningRow(box);
    release(`${go}.1`);
    const follower = start(['logs', '-f', 'p'], box.env);
    const seen = collected(follower);
    await waitFor(() => seen.stdout() === 'line 1\n', 'line 1');
    follower.child.stdout?.destroy();
    release(`${go}.2`);
    expect(await follower.done).toMatchObject({ code: 0, stderr: '' });
    release(`${go}.3`);
    await job.done;
  });

  it('ends quietly on ^C (SIGINT), exit 130', async () => {
    const box = sandbox();
    const go = box.path('go');
    const job = start(['-n', 'i', '--', fixture('lines.sh'), go, '2'], box.env);
    await runningRow(box);
    const follower = start(['logs', '-f', 'i'], box.env);
    release(`${go}.1`);
    const seen = collected(follower);
    await waitFor(() => seen.stdout() === 'line 1\n', 'line 1');
    follower.child.kill('SIGINT');
    expect(await follower.done).toMatchObject({ code: 130, stderr: '' });
    release(`${go}.2`);
    await job.done;
  });

  it('says at once when the running job does not capture its output (--capture 0)', async () => {
    const box = sandbox();
    const go = box.path('go');
    const job = start(['--capture', '0', '-n', 'c', '--', fixture('lines.sh'), go, '1'], box.env);
    await runningRow(box);
    const followed = await cronguard(['logs', '-f', 'c'], box.env);
    release(`${go}.1`);
    await job.done;
    expect(followed).toMatchObject({ code: 0, stdout: '' });
    expect(followed.stderr).toBe('cronguard logs: run 1 (c) does not capture its output (--capture 0 without -q): nothing to follow\n');
    expect(readdirSync(join(box.stateDir, 'live'))).toEqual([]);
  });

  it('of a run whose wrapper was killed: what its live copy holds, and that the wrapper is gone', async () => {
    const box = sandbox();
    const go = box.path('go');
    const job = start(['-n', 'k', '--', fixture('lines.sh'), go, '2'], box.env);
    const row = await runningRow(box);
    const path = liveFile(box, row);
    release(`${go}.1`);
    await waitFor(() => existsSync(path) && readFileSync(path, 'utf8') === 'line 1\n', 'line 1 to be copied');
    job.child.kill('SIGKILL');
    await job.done;
    const followed = await cronguard(['logs', '-f', 'k'], box.env);
    release(`${go}.2`);
    expect(followed).toMatchObject({ code: 0, stdout: 'line 1\n' });
    expect(followed.stderr).toBe(`cronguard logs: run 1 (k) ended: its wrapper (pid ${row.pid}) is gone, so the run was abandoned\n`);
    // The next run with output sweeps the dead wrapper's copy away.
    await cronguard(['-n', 'other', '--', 'echo', 'hi'], box.env);
    expect(readdirSync(join(box.stateDir, 'live'))).toEqual([]);
  });

  it('gives each attempt of --retries its own live copy, and leaves none behind', async () => {
    const box = sandbox();
    const result = await cronguard(['--retries', '1', '--retry-delay', '10ms', '-n', 'r', '--', 'sh', '-c', 'echo try; exit 1'], box.env);
    expect(result.code).toBe(1);
    expect(runs(box.stateDir).map((r) => r.output)).toEqual(['try\n', 'try\n']);
    expect(readdirSync(join(box.stateDir, 'live'))).toEqual([]);
  });
});
