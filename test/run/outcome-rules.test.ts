import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { BINARY, cronguard, runs, sandbox } from '../helpers.js';

// --min-duration and --fail-on-stderr: a run whose command exits 0 can still be a failure,
// for the exit code, the summary line, the run log, retries, pings and check alike.

const summary = (name: string, reason: string, run = 1) => new RegExp(`cronguard: ${name}: failed: ${reason} \\(run ${run}; cronguard logs ${run}\\)\\n$`);

describe('--min-duration', () => {
  it('fails a run that exits 0 too soon: exit 1, one summary line, status failed with the reason, exit_code 0 kept', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'backup', '--min-duration', '15s', '--', 'true'], box.env);
    expect(result).toMatchObject({ code: 1, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: backup: failed: ran [\d.]+m?s, shorter than --min-duration 15s \(the command exited 0\) \(run 1; cronguard logs 1\)\n$/);
    const [row] = runs(box.stateDir);
    expect(row).toMatchObject({ status: 'failed', exit_code: 0 });
    expect(row?.error).toMatch(/^ran [\d.]+m?s, shorter than --min-duration 15s$/);
  });

  it('lets a run that lasted long enough succeed, silently', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'slow', '--min-duration', '200ms', '--', 'sleep', '0.3'], box.env);
    expect(result).toEqual({ code: 0, signal: null, stdout: '', stderr: '' });
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'succeeded', exit_code: 0, error: null });
  });

  it('leaves a run that failed as it was: its own exit code, status and summary', async () => {
    const box = sandbox();
    const failed = await cronguard(['-n', 'three', '--min-duration', '1h', '--', 'sh', '-c', 'exit 3'], box.env);
    expect(failed.code).toBe(3);
    expect(failed.stderr).toMatch(/^cronguard: three: failed with exit 3 after .*\(run 1; cronguard logs 1\)\n$/);
    const timedOut = await cronguard(['-n', 'late', '--min-duration', '1m', '-t', '1h', '--', 'sh', '-c', 'kill -TERM $$'], box.env);
    expect(timedOut.code).toBe(143);
    expect(runs(box.stateDir).map((r) => [r.status, r.exit_code, r.error])).toEqual([
      ['failed', 3, null],
      ['killed', null, 'killed by SIGTERM'],
    ]);
  });

  it('is retried like any failure with --retries', async () => {
    const box = sandbox();
    const marker = box.path('once');
    // The first attempt is quick; the second takes long enough.
    const script = `if [ -e ${marker} ]; then sleep 0.3; else touch ${marker}; fi`;
    const result = await cronguard(['-n', 'again', '--min-duration', '200ms', '--retries', '1', '--retry-delay', '10ms', '--', 'sh', '-c', script], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/^cronguard: again: failed: ran .*, shorter than --min-duration 200ms .*; retrying in 10ms \(attempt 2 of 2\)\n$/);
    expect(runs(box.stateDir).map((r) => [r.status, r.attempt, r.exit_code])).toEqual([
      ['failed', 1, 0],
      ['succeeded', 2, 0],
    ]);
  });
});

describe('--fail-on-stderr', () => {
  it('fails a run that wrote to stderr: exit 1, its output passed on, then the summary; the first line in error', async () => {
    const box = sandbox();
    const script = 'echo done; echo "disk almost full" >&2; echo "second complaint" >&2';
    const result = await cronguard(['-n', 'complains', '--fail-on-stderr', '--', 'sh', '-c', script], box.env);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('done\n');
    expect(result.stderr).toMatch(/^disk almost full\nsecond complaint\ncronguard: complains: failed: wrote to stderr: disk almost full \(the command exited 0 after .*\) \(run 1; cronguard logs 1\)\n$/);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'failed', exit_code: 0, error: 'wrote to stderr: disk almost full' });
  });

  it('does not fail a run that wrote only to stdout, or nothing', async () => {
    const box = sandbox();
    expect(await cronguard(['-n', 'out', '--fail-on-stderr', '--', 'sh', '-c', 'echo all well'], box.env)).toMatchObject({ code: 0, stdout: 'all well\n', stderr: '' });
    expect(await cronguard(['-n', 'mute', '--fail-on-stderr', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(runs(box.stateDir).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });

  it("excepts a shell's set -x trace, nested levels too, and PS4 from the environment", async () => {
    const box = sandbox();
    const traced = await cronguard(['-n', 'traced', '--fail-on-stderr', '--', 'bash', '-c', 'set -x; x=$(echo nested); echo "$x"'], box.env);
    expect(traced).toMatchObject({ code: 0, stdout: 'nested\n', stderr: "++ echo nested\n+ x=nested\n+ echo nested\n" });
    // Bash run by root takes no PS4 from its environment: the script sets it too.
    const own = await cronguard(['-n', 'own', '--fail-on-stderr', '--', 'bash', '-c', 'PS4=">> "; set -x; x=$(echo a)'], { ...box.env, PS4: '>> ' });
    expect(own).toMatchObject({ code: 0, stderr: '>>> echo a\n>> x=a\n' });
    // With PS4 '>> ', a '+ ' line is no trace line.
    const other = await cronguard(['-n', 'other', '--fail-on-stderr', '--', 'sh', '-c', 'echo "+ not traced" >&2'], { ...box.env, PS4: '>> ' });
    expect(other.code).toBe(1);
    expect(other.stderr).toMatch(summary('other', 'wrote to stderr: \\+ not traced \\(the command exited 0 after .*\\)', 3));
  });

  it('judges whole lines however the pipe splits them, and a last line without a newline', async () => {
    const box = sandbox();
    const run = (name: string, script: string) => cronguard(['-n', name, '--fail-on-stderr', '--', 'sh', '-c', script], box.env);
    // A trace line written in two pieces, the second after a pause: still a trace line.
    expect((await run('split-trace', 'printf "+" >&2; sleep 0.2; printf " echo traced\\n" >&2')).code).toBe(0);
    // A complaint whose second piece looks like a trace line: still a complaint.
    const split = await run('split-complaint', 'printf "x" >&2; sleep 0.2; printf "+ y\\n" >&2');
    expect(split.code).toBe(1);
    const unended = await run('unended', 'printf "+ traced\\nwarning" >&2');
    expect(unended.code).toBe(1);
    expect(runs(box.stateDir).map((r) => [r.job, r.status, r.error])).toEqual([
      ['split-trace', 'succeeded', null],
      ['split-complaint', 'failed', 'wrote to stderr: x+ y'],
      ['unended', 'failed', 'wrote to stderr: warning'],
    ]);
  });

  it('shows a long first line truncated and printable, and counts an empty line', async () => {
    const box = sandbox();
    await cronguard(['-n', 'long', '--fail-on-stderr', '--', 'sh', '-c', `printf '\\033[31m%s\\n' ${'w'.repeat(300)} >&2`], box.env);
    await cronguard(['-n', 'empty', '--fail-on-stderr', '--', 'sh', '-c', 'echo >&2'], box.env);
    const [long, empty] = runs(box.stateDir);
    expect(long?.error).toBe(`wrote to stderr: \\x1b[31m${'w'.repeat(112)}...`);
    expect(empty?.error).toBe('wrote to stderr: (an empty line)');
  });

  it('sees stderr with --capture 0 too, and fails with -q, showing the held output', async () => {
    const box = sandbox();
    const uncaptured = await cronguard(['-n', 'uncaptured', '--capture', '0', '--fail-on-stderr', '--', 'sh', '-c', 'echo out; echo err >&2'], box.env);
    expect(uncaptured).toMatchObject({ code: 1, stdout: 'out\n' });
    expect(uncaptured.stderr).toMatch(/^err\ncronguard: uncaptured: failed: wrote to stderr: err/);
    const quiet = await cronguard(['-n', 'quiet', '-q', '--fail-on-stderr', '--', 'sh', '-c', 'echo out; echo err >&2'], box.env);
    expect(quiet).toMatchObject({ code: 1, stdout: 'out\n' });
    expect(quiet.stderr).toMatch(/^err\ncronguard: quiet: failed: wrote to stderr: err/);
    expect(runs(box.stateDir).map((r) => [r.status, r.output])).toEqual([
      ['failed', null],
      ['failed', 'out\nerr\n'],
    ]);
  });

  it('holds no more than a line of a command writing 256 MiB of trace lines to stderr', async () => {
    const box = sandbox();
    // Peak memory of cronguard (the largest child python waited for: yes and head are small).
    const measure = 'import resource, subprocess, sys; code = subprocess.call(sys.argv[1:], stderr=subprocess.DEVNULL); print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)';
    const args = ['-c', measure, process.execPath, BINARY, '-n', 'chatty', '--no-log', '--fail-on-stderr', '--', 'sh', '-c', `yes '+ ${'x'.repeat(100)}' | head -c 268435456 >&2`];
    const child = spawn('python3', args, { env: box.env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    await new Promise((resolve) => child.on('close', resolve));
    const [code, maxKiB] = out.trim().split(' ').map(Number);
    expect(code).toBe(0);
    expect(maxKiB).toBeLessThan(200 * 1024);
  });

  it('counts as a failure for --ping-url: URL/fail', async () => {
    const box = sandbox();
    const paths: string[] = [];
    const server = createServer((req, res) => {
      paths.push((req.url ?? '').replace(/\?.*/, ''));
      req.resume();
      req.on('end', () => res.end('OK'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ping/abc`;
    const result = await cronguard(['-n', 'pinged', '--fail-on-stderr', '--ping-url', url, '--', 'sh', '-c', 'echo warning >&2'], box.env).finally(() => {
      server.closeAllConnections();
      server.close();
    });
    expect(result.code).toBe(1);
    expect(paths).toEqual(['/ping/abc/start', '/ping/abc/fail']);
  });

  it('counts as a failure for check', async () => {
    const box = sandbox();
    await cronguard(['-n', 'checked', '--fail-on-stderr', '--', 'sh', '-c', 'echo warning >&2'], box.env);
    const check = await cronguard(['check', 'checked', '--max-age', '1h'], box.env);
    expect(check.code).toBe(2);
    expect(check.stdout).toMatch(/^CRITICAL - checked last run failed/);
  });
});

describe('bad values', () => {
  const cases: [string, string[], NodeJS.ProcessEnv, RegExp][] = [
    ['a --min-duration that is no duration', ['--min-duration', 'soon'], {}, /^cronguard: --min-duration: invalid duration 'soon'/],
    ['a negative --min-duration', ['--min-duration', '-5s'], {}, /^cronguard: --min-duration: invalid duration '-5s'/],
    ['a --min-duration no run could meet within --timeout', ['--min-duration', '10m', '-t', '5m'], {}, /^cronguard: --min-duration 10m00s is not shorter than --timeout 5m00s: no run could succeed/],
    ['--fail-on-stderr with a value', ['--fail-on-stderr=yes'], {}, /^cronguard: option --fail-on-stderr takes no value/],
    ['--syslog with a value', ['--syslog=on'], {}, /^cronguard: option --syslog takes no value/],
    ['CRONGUARD_SYSLOG that is neither on nor off', [], { CRONGUARD_SYSLOG: 'maybe' }, /^cronguard: \$CRONGUARD_SYSLOG: 'maybe' is not on or off \(on, off, true, false, yes, no, 1, 0\)/],
  ];

  it.each(cases)('%s: one line, 64, nothing run or recorded', async (_what, options, env, message) => {
    const box = sandbox();
    const marker = box.path('ran');
    const result = await cronguard(['-n', 'bad', ...options, '--', 'touch', marker], { ...box.env, ...env });
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(existsSync(marker)).toBe(false);
    expect(runs(box.stateDir)).toEqual([]);
  });
});
