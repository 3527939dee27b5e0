import { describe, expect, it } from 'vitest';
import { cronguard, fixture, runs, sandbox, start, waitFor } from '../helpers.js';

describe('output', () => {
  it('passes stdout and stderr through to their own streams and keeps the arrival order', async () => {
    const box = sandbox();
    const result = await cronguard(['-n', 'io', '--', fixture('interleave.sh'), '6'], box.env);
    expect(result.stdout).toBe('line 1\nline 3\nline 5\n');
    expect(result.stderr).toBe('line 2\nline 4\nline 6\n');
    expect(runs(box.stateDir)[0]).toMatchObject({
      output: 'line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n',
      output_truncated: 0,
    });
  });

  it('passes output through live, not at the end', async () => {
    const box = sandbox();
    const run = start(['--', 'sh', '-c', 'echo first; sleep 3; echo second'], box.env);
    let seen = '';
    run.child.stdout?.on('data', (c: Buffer) => (seen += c.toString()));
    await waitFor(() => seen.includes('first'), 'the first line', 2000);
    expect(seen).not.toContain('second');
    run.child.kill('SIGTERM');
    await run.done;
  });

  it('keeps only the last --capture bytes and marks the output truncated', async () => {
    const box = sandbox();
    const result = await cronguard(['--capture', '10', '--', 'sh', '-c', 'echo 0123456789; echo abcdefghi'], box.env);
    expect(result.stdout).toBe('0123456789\nabcdefghi\n');
    expect(runs(box.stateDir)[0]).toMatchObject({ output: 'abcdefghi\n', output_truncated: 1 });
  });

  it('never stores half a multi-byte character at the cut', async () => {
    const box = sandbox();
    await cronguard(['--capture', '5', '--', 'printf', 'ééé'], box.env);
    expect(runs(box.stateDir)[0]).toMatchObject({ output: 'éé', output_truncated: 1 });
  });

  it('keeps no output with --capture 0 but still passes it through', async () => {
    const box = sandbox();
    const result = await cronguard(['--capture', '0', '--', 'echo', 'hi'], box.env);
    expect(result.stdout).toBe('hi\n');
    expect(runs(box.stateDir)[0]).toMatchObject({ output: null, output_truncated: 0 });
  });
});

describe('-q (chronic-style)', () => {
  it('prints nothing when the command succeeds, yet logs the output', async () => {
    const box = sandbox();
    const result = await cronguard(['-q', '-n', 'q', '--', fixture('interleave.sh'), '4'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(runs(box.stateDir)[0]?.output).toBe('line 1\nline 2\nline 3\nline 4\n');
  });

  it('replays everything, stream by stream, when the command fails', async () => {
    const box = sandbox();
    const result = await cronguard(['-q', '-n', 'q', '--', 'sh', '-c', `${fixture('interleave.sh')} 4; exit 3`], box.env);
    // The summary line comes after the command's own output, -q or not.
    expect(result).toMatchObject({ code: 3, stdout: 'line 1\nline 3\n' });
    expect(result.stderr).toMatch(/^line 2\nline 4\ncronguard: q: failed with exit 3 after .* \(run 1; cronguard logs 1\)\n$/);
  });

  it('replays output on a timeout too', async () => {
    const box = sandbox();
    const result = await cronguard(['-q', '-n', 't', '-t', '300ms', '--', 'sh', '-c', 'echo partial; sleep 5'], box.env);
    expect(result.code).toBe(124);
    expect(result.stdout).toBe('partial\n');
    expect(result.stderr).toMatch(/t: timed out after 300ms/);
  });

  it('spills large output to a temporary file and still replays all of it', async () => {
    const box = sandbox();
    const bytes = 6 * 1024 * 1024;
    const result = await cronguard(
      ['-q', '--capture', '100', '--', 'sh', '-c', `head -c ${bytes} /dev/zero | tr '\\0' a; echo; exit 1`],
      box.env,
    );
    expect(result.code).toBe(1);
    expect(result.stdout.length).toBe(bytes + 1);
    expect(result.stdout.startsWith('aaaa')).toBe(true);
    expect(runs(box.stateDir)[0]).toMatchObject({ output_truncated: 1 });
    expect(runs(box.stateDir)[0]?.output).toHaveLength(100);
  });
});
