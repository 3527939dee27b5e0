import { describe, expect, it } from 'vitest';
import { BINARY, cronguard, runs, sandbox } from '../helpers.js';

// An attempt that counts itself in FILE, says so on stdout and stderr (without a newline on
// stderr when MIDLINE is set), and fails (exit 3) until attempt FAILURES + 1.
const attempt = (file: string, failures: number, extra = '') =>
  ['sh', '-c', `n=$(($(cat ${file} 2>/dev/null || echo 0) + 1)); echo $n > ${file}; echo "out $n"; printf "try $n" >&2; ${extra} [ $n -gt ${failures} ] && exit 0; exit 3`];

describe('-q with --retries: a failure shows only if the last attempt fails', () => {
  it('a failure that a later attempt mended shows nothing: no output, no "retrying" line', async () => {
    const box = sandbox();
    const result = await cronguard(['-q', '-n', 'mended', '--retries', '2', '--retry-delay', '10ms', '--', ...attempt(box.path('n'), 1)], box.env);
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(runs(box.stateDir).map((r) => [r.attempt, r.status])).toEqual([[1, 'failed'], [2, 'succeeded']]);
  });

  it('when the last attempt fails too, every attempt\'s output shows, with the retry lines in their places', async () => {
    const box = sandbox();
    const result = await cronguard(['-q', '-n', 'hopeless', '--retries', '1', '--retry-delay', '10ms', '--', ...attempt(box.path('n'), 9)], box.env);
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('out 1\nout 2\n');
    // The command's stderr ends mid-line: each line of cronguard's own starts a new one.
    expect(result.stderr.split('\n')).toEqual([
      'try 1',
      expect.stringMatching(/^cronguard: hopeless: failed with exit 3 after \S+ \(run 1; cronguard logs 1\); retrying in 10ms \(attempt 2 of 2\)$/),
      'try 2',
      expect.stringMatching(/^cronguard: hopeless: failed with exit 3 after \S+ \(run 2; cronguard logs 2\)$/),
      '',
    ]);
  });

  it('a pause between attempts ends the run with its failure: what was held shows, then why no retry came', async () => {
    const box = sandbox();
    const pause = `${process.execPath} ${BINARY} disable paused --reason maintenance >/dev/null 2>&1;`;
    const result = await cronguard(['-q', '-n', 'paused', '--retries', '3', '--retry-delay', '100ms', '--', ...attempt(box.path('n'), 9, pause)], box.env);
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('out 1\n');
    expect(result.stderr.split('\n')).toEqual([
      'try 1',
      expect.stringMatching(/^cronguard: paused: failed with exit 3 after .*; retrying in 100ms \(attempt 2 of 4\)$/),
      expect.stringMatching(/^cronguard: paused: not retrying: paused since \S+ by \S+: maintenance/),
      '',
    ]);
  });
});
