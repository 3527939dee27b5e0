import { describe, expect, it } from 'vitest';
import { cronguard, runs, sandbox, smallDisk } from '../helpers.js';

const MiB = 1024 * 1024;

// Numbered lines, so any lost, doubled or reordered part shows.
const numbered = (count: number) => `seq 1 ${count}; exit 1`;
const expected = (count: number) => `${Array.from({ length: count }, (_, i) => i + 1).join('\n')}\n`;

describe('-q when its temporary file takes no more', () => {
  it('a full disk under the spill file loses nothing: the rest is held in memory and replayed in order', async () => {
    if (process.geteuid?.() !== 0) return;
    const box = sandbox();
    // About 7 MB: 4 MiB in memory, about 1 MiB in the file, the rest in memory again.
    const result = await cronguard(['-q', '-n', 'full', '--', 'sh', '-c', numbered(1_000_000)], { ...box.env, TMPDIR: smallDisk('1m') });
    expect(result.code).toBe(1);
    expect(result.stdout === expected(1_000_000)).toBe(true);
    expect(result.stderr).toMatch(/^cronguard: full: failed with exit 1 after \S+ \(run 1; cronguard logs 1\)\n$/);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'failed', exit_code: 1, error: null });
  });

  it('without a usable temporary directory, memory holds a bounded part and one line says what was dropped', async () => {
    const box = sandbox();
    const total = 24 * MiB;
    const script = `head -c ${total} /dev/zero | tr '\\0' a; exit 1`;
    const result = await cronguard(['-q', '-n', 'notmp', '--', 'sh', '-c', script], { ...box.env, TMPDIR: box.path('missing') });
    expect(result.code).toBe(1);
    expect(result.stdout.length).toBeLessThanOrEqual(20 * MiB);
    const dropped = total - result.stdout.length;
    const [warning, summary, ...rest] = result.stderr.split('\n');
    const said = `-q held only part of its output: the last ${dropped} bytes were dropped (temporary file: ${box.path('missing')}/cronguard-quiet-`;
    expect(warning?.startsWith(`cronguard: notmp: ${said}`)).toBe(true);
    expect(warning?.endsWith(': ENOENT (open); at most 20 MiB is held in memory)')).toBe(true);
    expect(summary).toMatch(/^cronguard: notmp: failed with exit 1 after \S+ \(run 1; cronguard logs 1\)$/);
    expect(rest).toEqual(['']);
    expect(runs(box.stateDir)[0]?.error).toBe(warning?.slice('cronguard: notmp: '.length));
  });
});
