import { describe, expect, it } from 'vitest';
import { cronguard, runs, sandbox } from '../helpers.js';
import { holdSlots } from '../slots.js';
import { HAVE_TMUX, onScreen } from '../tmux.js';

// A job run with --max-running 3, two copies of it running (slots 0 and 1), beside a job
// without it that runs too and one that ran.
async function twoOfThree() {
  const box = sandbox();
  const { COLUMNS: _, ...rest } = box.env;
  const env = { ...rest, TZ: 'UTC' };
  await cronguard(['-n', 'done', '--', 'true'], env);
  const single = await holdSlots('single', 1, 1, env, box.dir);
  const report = await holdSlots('report', 3, 2, env, box.dir);
  return { box, env, release: () => Promise.all([single.release(), report.release()]) };
}

describe('status: a job with --max-running', () => {
  it.runIf(HAVE_TMUX)('reads "2 of 3 running" on a terminal, a job without it as before', async () => {
    const { env, release } = await twoOfThree();
    const screen = await onScreen(['status'], env, 100);
    await release();
    const rows = screen.trimEnd().split('\n');
    expect(rows.find((r) => r.startsWith('report'))).toMatch(/^report\s+2 of 3 running\s+-/);
    expect(rows.find((r) => r.startsWith('single'))).toMatch(/^single\s+running \S+\s+-/);
    expect(rows.find((r) => r.startsWith('done'))).toMatch(/^done\s+idle\s+succeeded/);
  });

  it.runIf(HAVE_TMUX)('status NAME names the holder of each slot, in its own line', async () => {
    const { box, env, release } = await twoOfThree();
    const screen = await onScreen(['status', 'report'], env, 100);
    const single = await onScreen(['status', 'single'], env, 100);
    await release();
    const [, singleRun, first, second] = runs(box.stateDir);
    const at = (iso: string | undefined) => (iso ?? '').slice(0, 19).replace('T', ' ');
    const lines = screen.trimEnd().split('\n');
    expect(lines.slice(0, 4)).toEqual([
      'report  (times in UTC)',
      '  state        2 of 3 running',
      expect.stringMatching(new RegExp(`^  slot 0       on \\S+ \\(pid ${first?.pid}, run 3, since ${at(first?.started_at)} \\((now|\\S+ ago)\\)\\)$`)),
      expect.stringMatching(new RegExp(`^  slot 1       on \\S+ \\(pid ${second?.pid}, run 4, since ${at(second?.started_at)} \\((now|\\S+ ago)\\)\\)$`)),
    ]);
    expect(lines[4]).toMatch(/^ {2}command /);
    // One holder, as it always read.
    expect(single.split('\n')[1]).toMatch(new RegExp(`^  state        running \\S+ on \\S+ \\(pid ${singleRun?.pid}, run 2, since `));
    expect(single).not.toMatch(/^ {2}slot /m);
  });

  it('--json has the slots of a job with --max-running, and nothing new for one without', async () => {
    const { box, env, release } = await twoOfThree();
    const all = JSON.parse((await cronguard(['status', '--json'], env)).stdout) as Record<string, unknown>[];
    const one = JSON.parse((await cronguard(['status', 'report', '--json'], env)).stdout) as Record<string, unknown>[];
    await release();
    const [, , first, second] = runs(box.stateDir);
    const byName = new Map(all.map((j) => [j.job, j]));
    const slots = {
      max_running: 3,
      running: [
        { slot: 0, host: first?.host, pid: first?.pid, run_id: 3, since: first?.started_at },
        { slot: 1, host: second?.host, pid: second?.pid, run_id: 4, since: second?.started_at },
      ],
    };
    expect(byName.get('report')).toMatchObject({ state: 'running', slots });
    expect(one[0]).toMatchObject({ state: 'running', slots });
    expect(byName.get('single')).toMatchObject({ state: 'running', running_run_id: 2 });
    expect(byName.get('single')).not.toHaveProperty('slots');
    expect(byName.get('done')).not.toHaveProperty('slots');
  });

  it('reads as before once the copies ended', async () => {
    const { env, release } = await twoOfThree();
    await release();
    const table = (await cronguard(['status'], env)).stdout;
    expect(table.split('\n').find((r) => r.startsWith('report'))).toMatch(/^report\s+idle\s+succeeded/);
    const [report] = JSON.parse((await cronguard(['status', 'report', '--json'], env)).stdout) as Record<string, unknown>[];
    expect(report).not.toHaveProperty('slots');
  });
});
