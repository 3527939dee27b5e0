import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BINARY, cronguard, fixture, release, runs, sandbox, smallDisk, start, waitFor } from '../helpers.js';

describe('output', () => {
  it('passes stdout and stderr through to their own streams and keeps the arrival order', async () => {
    const box = sandbox();
    const seen = box.path('seen');
    const run = start(['-n', 'io', '--', fixture('interleave.sh'), '6', seen], box.env);
    // Each line is let out only once the one before came through, which fixes their order.
    let through = '';
    const passOn = (chunk: Buffer) => {
      through += chunk.toString();
      for (const [, n] of through.matchAll(/^line (\d+)\n/gm)) release(`${seen}.${n}`);
    };
    run.child.stdout?.on('data', passOn);
    run.child.stderr?.on('data', passOn);
    const result = await run.done;
    expect(result.code).toBe(0);
    expect(result.stdout).toBe('line 1\nline 3\nline 5\n');
    expect(result.stderr).toBe('line 2\nline 4\nline 6\n');
    expect(runs(box.stateDir)[0]).toMatchObject({
      output: 'line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n',
      output_truncated: 0,
    });
  });

  it('passes output through live, not at the end', async () => {
    const box = sandbox();
    const seen = box.path('seen');
    // The command does not finish until the test has seen its line.
    const run = start(['--', fixture('interleave.sh'), '1', seen], box.env);
    let through = '';
    run.child.stdout?.on('data', (c: Buffer) => (through += c.toString()));
    await waitFor(() => through === 'line 1\n', 'the line to come through');
    release(`${seen}.1`);
    expect(await run.done).toMatchObject({ code: 0, stdout: 'line 1\n' });
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

describe('output that cannot be written', () => {
  it.each([
    ['passed through', [], 0, 'succeeded'],
    ['replayed (-q)', ['-q'], 3, 'failed'],
  ])('to a stdout on a full disk, %s: one line says so, the run log too, and the exit code stays the command\'s', async (_how, flags, code, status) => {
    if (process.geteuid?.() !== 0) return;
    const box = sandbox();
    const out = join(smallDisk('64k', true), 'out');
    const command = `${process.execPath} ${BINARY} -n full ${flags.join(' ')} -- sh -c 'echo hello; exit ${code}' > ${out}`;
    const child = spawn('bash', ['-c', command], { env: box.env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    expect(await new Promise((resolve) => child.on('close', resolve))).toBe(code);
    const note = 'its stdout could not be written (ENOSPC (write)); the rest of the output to it was dropped';
    expect(stderr.split('\n')[0]).toBe(`cronguard: full: ${note}`);
    expect(stderr.match(/could not be written/g)).toHaveLength(1);
    expect(runs(box.stateDir)[0]).toMatchObject({ status, exit_code: code, error: note });
  });

  it('to a reader that went away (EPIPE): nothing said, the command goes on, its exit code is truthful', async () => {
    const box = sandbox();
    const done = box.path('done');
    const command = `${process.execPath} ${BINARY} -n gone -- sh -c 'seq 1 100000; touch ${done}; exit 4' | head -1; echo \${PIPESTATUS[0]}`;
    const result = await new Promise<[string, string]>((resolve) => {
      const child = spawn('bash', ['-c', command], { env: box.env, stdio: ['ignore', 'pipe', 'pipe'] });
      let [stdout, stderr] = ['', ''];
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('close', () => resolve([stdout, stderr]));
    });
    expect(result[0]).toBe('1\n4\n');
    expect(result[1]).toMatch(/^cronguard: gone: failed with exit 4 after \S+ \(run 1; cronguard logs 1\)\n$/);
    expect(existsSync(done)).toBe(true);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'failed', exit_code: 4, error: null });
  });
});

describe('many attempts in one invocation', () => {
  it('leave nothing behind on cronguard\'s own stdout and stderr (no listener piles up)', async () => {
    const box = sandbox();
    // Thirteen attempts: Node warns (shown under -v) past ten listeners on one stream.
    const result = await cronguard(['-v', '-n', 'again', '--retries', '12', '--retry-delay', '0', '--', 'sh', '-c', 'echo hi; exit 1'], box.env);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('hi\n'.repeat(13));
    expect(runs(box.stateDir)).toHaveLength(13);
    expect(result.stderr).not.toMatch(/node: /);
  });
});

describe('-q (chronic-style)', () => {
  it('prints nothing when the command succeeds, yet logs the output', async () => {
    const box = sandbox();
    const result = await cronguard(['-q', '-n', 'q', '--', fixture('interleave.sh'), '4'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    // With nothing passed through, the test cannot pace the command, so which pipe cronguard
    // reads first is up to the scheduler; within each stream the order holds.
    const logged = (runs(box.stateDir)[0]?.output ?? '').split('\n');
    expect(logged.filter((l) => /^line [13]$/.test(l))).toEqual(['line 1', 'line 3']);
    expect(logged.filter((l) => /^line [24]$/.test(l))).toEqual(['line 2', 'line 4']);
    expect(logged.filter(Boolean)).toHaveLength(4);
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
    // A timeout cannot wait for a barrier; 2 s is ample for a shell to echo a line.
    const result = await cronguard(['-q', '-n', 't', '-t', '2s', '--', 'sh', '-c', 'echo partial; sleep 60'], box.env);
    expect(result.code).toBe(124);
    expect(result.stdout).toBe('partial\n');
    expect(result.stderr).toMatch(/^cronguard: t: timed out after 2s: sent SIGTERM to its process group \(run 1; cronguard logs 1\)\n$/);
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

  // Past every 8 MiB relayed or replayed cronguard collects its young garbage (the pipes'
  // chunks): the output is the same, byte for byte, stream by stream, in order.
  it.each([
    ['passed through', []],
    ['replayed by -q', ['-q']],
  ])('keeps tens of MiB of interleaved output exact when %s, and the tail in the run log too', async (_how, args) => {
    const box = sandbox();
    const script = 'seq 1 4000000; echo to-stderr >&2; seq 4000001 4500000; echo last >&2; exit 1';
    const result = await cronguard([...args, '-n', 'big', '--', 'sh', '-c', script], box.env);
    const expected = execFileSync('sh', ['-c', 'seq 1 4000000; seq 4000001 4500000'], { maxBuffer: 64 * 1024 * 1024 }).toString();
    expect(result.code).toBe(1);
    expect(result.stdout.length).toBe(expected.length);
    expect(result.stdout === expected).toBe(true);
    expect(result.stderr.startsWith('to-stderr\nlast\n')).toBe(true);
    // The two pipes are read as their data comes: stderr's lines may land anywhere near.
    const output = runs(box.stateDir)[0]?.output as string;
    expect(output).toHaveLength(65536);
    expect(output.replace('last\n', '').endsWith('4499999\n4500000\n')).toBe(true);
  });
});
