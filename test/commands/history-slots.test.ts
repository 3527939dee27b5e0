import { describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';
import { holdSlots } from '../slots.js';

describe('cronguard history --slot', () => {
  it('shows a SLOT column while a shown run had --max-running above 1, and filters by it', async () => {
    const box = sandbox();
    await cronguard(['-n', 'single', '--', 'true'], box.env);
    const held = await holdSlots('report', 3, 2, box.env, box.dir);
    const all = await cronguard(['history'], box.env);
    const second = await cronguard(['history', '--slot', '1'], box.env);
    const first = JSON.parse((await cronguard(['history', '--slot', '0', '--json'], box.env)).stdout) as { id: number; slot: number | null; max_running: number | null }[];
    const single = await cronguard(['history', 'single'], box.env);
    await held.release();
    expect(all.stdout).toMatch(/^ID\s+JOB\s+STATUS\s+TRIGGER\s+STARTED \(\S+\)\s+DURATION\s+EXIT\s+SKIPS\s+HOST\s+SLOT\s+COMMAND\n/);
    const rows = all.stdout.trim().split('\n').slice(1).map((r) => r.split(/\s+/));
    // ID, JOB and SLOT: the eleventh word, after STARTED's two (date and time).
    expect(rows.map((r) => [r[0], r[1], r[10]])).toEqual([
      ['3', 'report', '1'],
      ['2', 'report', '0'],
      ['1', 'single', '0'],
    ]);
    expect(second.stdout.trim().split('\n').slice(1).map((r) => r.split(/\s+/)[0])).toEqual(['3']);
    // A run from a job without slots held slot 0 of 1.
    expect(first.map((r) => [r.id, r.slot, r.max_running])).toEqual([
      [2, 0, 3],
      [1, 0, 1],
    ]);
    // Where no shown run had several slots, the table is as it always was.
    expect(single.stdout).toMatch(/^ID\s+JOB\s+STATUS\s+TRIGGER\s+STARTED \(\S+\)\s+DURATION\s+EXIT\s+SKIPS\s+HOST\s+COMMAND\n/);
  });

  it('says that nothing matches a slot no run held', async () => {
    const box = sandbox();
    await cronguard(['-n', 'single', '--', 'true'], box.env);
    expect(await cronguard(['history', '--slot', '5'], box.env)).toMatchObject({ code: 0, stdout: '', stderr: 'cronguard: no runs recorded that match\n' });
  });

  it.each([['-1'], ['x'], ['64'], ['1.5'], ['']])('rejects --slot %j with one line and exit 64', async (value) => {
    const result = await cronguard(['history', '--slot', value], sandbox().env);
    expect(result.code).toBe(64);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(`cronguard history: --slot: '${value}' is not a slot number from 0 to 63 (see cronguard history --help)\n`);
  });
});
