import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, runs, sandbox } from '../helpers.js';

// Every bad input: one clear line on stderr, the contract's exit code, nothing run, nothing
// recorded, no stack trace.
describe('bad input', () => {
  const cases: [string, string[], number, RegExp][] = [
    ['unknown option', ['--frobnicate'], 64, /unknown option '--frobnicate'/],
    ['bad duration', ['-t', '5x'], 64, /--timeout: invalid duration '5x'/],
    ['negative duration', ['-t', '-1'], 64, /--timeout: invalid duration '-1'/],
    ['conflict code out of range', ['-E', '300'], 64, /not an exit code \(0-255\)/],
    ['empty name', ['-n', ''], 64, /job name is empty/],
    ['path in name', ['-n', '../../etc/x'], 64, /invalid job name/],
    ['10 KB name', ['-n', 'x'.repeat(10_240)], 64, /the limit is 100/],
    ['unknown lock', ['-l', 'etcd'], 64, /unknown lock backend/],
    ['bad signal', ['--kill-signal', 'FOO'], 64, /unknown signal/],
    ['serve with an unparseable --listen', [], 64, /--listen: 'nowhere' is not ADDRESS:PORT/],
    ['an empty lock dir', ['--lock-dir', ''], 64, /--lock-dir: the lock directory must not be empty/],
    ['an empty state dir', ['--state-dir', ''], 64, /--state-dir: the state directory must not be empty/],
    ['a timeout that rounds to no time', ['-t', '0.4ms'], 64, /--timeout: '0.4ms' is shorter than the smallest duration, 1ms/],
    ['a duration beyond ten years', ['-w', '4000d'], 64, /--wait: '4000d' is longer than 3650d/],
    ['a port that is not a number', ['--db', 'postgres://u@127.0.0.1:abc/d'], 64, /the port in --db is not a number/],
    // The other form of a libpq connection string, keyword=value pairs, refused as surely.
    ['keyword=value pairs with a bare word', ['--db', 'host=127.0.0.1 dbname'], 64, /--db: expected keyword=value pairs \(a value with spaces must be in single quotes/],
    ['keyword=value pairs with an unclosed quote', ['--db', "host=127.0.0.1 password='a b"], 64, /--db: a quoted value is not closed/],
    ['keyword=value pairs naming an unsupported keyword', ['--db', 'service=ops dbname=test'], 64, /--db: unsupported connection parameter 'service'/],
    ['keyword=value pairs with a port that is not one', ['--db', 'host=127.0.0.1 port=abc dbname=test'], 64, /port in --db is not a number/],
  ];

  it.each(cases)('%s', async (_what, options, code, message) => {
    const box = sandbox();
    const marker = box.path('ran');
    const args =
      _what.startsWith('serve') ? ['serve', '--listen', 'nowhere'] : [...options, '--', 'sh', '-c', `touch ${marker}`];
    const result = await cronguard(args, box.env);
    expect(result.code).toBe(code);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(marker)).toBe(false);
    expect(runs(box.stateDir)).toEqual([]);
  });

  it('an empty command', async () => {
    const result = await cronguard(['-n', 'x', '--', ''], sandbox().env);
    expect(result).toMatchObject({ code: 64, stdout: '', stderr: 'cronguard: the command is an empty string (see cronguard --help)\n' });
  });

  it('PGPORT that is not a number: 64, not a run that never settles (and exits 0)', async () => {
    const box = sandbox();
    const result = await cronguard(['--db', 'postgres://u@127.0.0.1/d', '-n', 'x', '--', 'touch', box.path('ran')], { ...box.env, PGPORT: 'abc' });
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: \$PGPORT 'abc' is not a number from 1 to 65535/);
    expect(existsSync(box.path('ran'))).toBe(false);
  });

  it('no command', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'x'], box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: no command given.*\n$/);
  });

  it('no arguments at all prints the usage and exits 64', async () => {
    const result = await cronguard([], sandbox().env);
    expect(result.code).toBe(64);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^Usage: cronguard /);
  });

  it('a nonexistent command exits 127 without taking the lock, and is recorded as failed', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'j', '--', 'no-such-command-xyz'], box.env);
    expect(result).toMatchObject({ code: 127, stdout: '', stderr: 'cronguard: j: command not found: no-such-command-xyz (run 1; cronguard logs 1)\n' });
    expect(runs(box.stateDir)).toEqual([
      expect.objectContaining({ job: 'j', status: 'failed', exit_code: 127, error: 'command not found: no-such-command-xyz', tick: null, duration_ms: 0 }),
    ]);
    expect(existsSync(box.lockDir)).toBe(false);
  });

  it('a non-executable command exits 126, and is recorded as failed', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'j', '--', `${import.meta.dirname}/../fixtures/not-executable.sh`], box.env);
    expect(result.code).toBe(126);
    expect(result.stderr).toMatch(/^cronguard: j: cannot execute .*not-executable.sh: permission denied \(run 1; cronguard logs 1\)\n$/);
    expect(runs(box.stateDir)).toEqual([expect.objectContaining({ status: 'failed', exit_code: 126, error: expect.stringMatching(/permission denied/) })]);
    expect(existsSync(box.lockDir)).toBe(false);
  });

  it('a directory as the command exits 126', async () => {
    const box = sandbox();
    const result = await cronguard(['--', '/tmp'], box.env);
    expect(result.code).toBe(126);
    expect(result.stderr).toMatch(/is a directory/);
  });

  it('--help and --version print on stdout and exit 0', async () => {
    const env = sandbox().env;
    const help = await cronguard(['--help'], env);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Usage: cronguard \[run\]/);
    expect(help.stdout).toMatch(/--conflict-exit-code N/);
    const version = await cronguard(['--version'], env);
    expect(version.stdout).toMatch(/^cronguard \d+\.\d+\.\d+/);
  });

  it('runs a program named like a subcommand after --', async () => {
    const box = sandbox();
    const result = await cronguard(['--', 'history'], box.env);
    expect(result.code).toBe(127);
    expect(result.stderr).toMatch(/command not found: history/);
  });
});
