import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

const HOUR = 3_600_000;
const ago = (ms: number) => new Date(Date.now() - ms);
// A monitoring plugin's whole output: one line, `STATE - message[ | perfdata]`.
const PLUGIN_LINE = /^(OK|WARNING|CRITICAL|UNKNOWN) - [^\n|]+( \| ('?[a-z_]+'?=[\d.]+s;[\d.]*;[\d.]*;0; ?)+)?\n$/;

describe.each(STORES)('check (%s)', (kind) => {
  const check = async (env: NodeJS.ProcessEnv, ...args: string[]) => {
    const result = await cronguard(['check', ...args], env);
    expect(result.stderr).toBe('');
    expect(result.stdout).toMatch(PLUGIN_LINE);
    return result;
  };

  it('is OK after a recent success, WARNING past --warn-age, CRITICAL past --max-age, with performance data', async () => {
    const box = storeBox(kind);
    const job = box.job('nightly');
    await cronguard(['migrate'], box.env);
    await box.insertRuns([{ job, status: 'succeeded', startedAt: ago(3 * HOUR + 12 * 60_000), durationMs: 41_000 }]);
    const ok = await check(box.env, job, '--max-age', '1d');
    expect(ok.code).toBe(0);
    // The age counts on while the test runs, slowly on a busy machine: 3h12m and a little more.
    const shown = new RegExp(`^OK - ${job} succeeded 3h1\\dm ago in 41s \\| last_success_age=(\\d+(?:\\.\\d+)?)s;;86400;0; last_success_duration=41s;;;0;\\n$`).exec(ok.stdout);
    expect(shown, ok.stdout).not.toBeNull();
    expect(Number(shown?.[1])).toBeGreaterThanOrEqual(3 * 3600 + 12 * 60);
    expect(Number(shown?.[1])).toBeLessThan(3 * 3600 + 20 * 60);
    const warn = await check(box.env, job, '--max-age', '1d', '--warn-age', '2h');
    expect(warn.code).toBe(1);
    expect(warn.stdout).toMatch(/^WARNING - .* \(over --warn-age 2h00m\) \| last_success_age=[\d.]+s;7200;86400;0;/);
    const crit = await check(box.env, job, '--max-age', '3h');
    expect(crit.code).toBe(2);
    expect(crit.stdout).toMatch(/^CRITICAL - .*succeeded 3h1\dm ago in 41s \(over --max-age 3h00m\)/);
    const asJson = await cronguard(['check', job, '--max-age', '3h', '--json'], box.env);
    expect(asJson.code).toBe(2);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ job, state: 'CRITICAL', exit_code: 2, last_success_duration_s: 41 });
  });

  it('is CRITICAL when the last run failed or could not start, whatever the age of the last success', async () => {
    const box = storeBox(kind);
    const [failed, missing] = [box.job('failed'), box.job('missing')];
    await cronguard(['-n', failed, '--', 'true'], box.env);
    await cronguard(['-n', failed, '--', 'sh', '-c', 'exit 3'], box.env);
    await cronguard(['-n', missing, '--', '/nonexistent/command'], box.env);
    const one = await check(box.env, failed, '--max-age', '1d');
    expect(one.code).toBe(2);
    expect(one.stdout).toMatch(new RegExp(`^CRITICAL - ${failed} last run failed \\(exit 3\\) .* ago \\(run \\d+\\); last succeeded .* ago in `));
    const two = await check(box.env, missing, '--max-age', '1d');
    expect(two.code).toBe(2);
    expect(two.stdout).toMatch(/last run failed \(exit 127\).*; last has never succeeded/);
  });

  it('is CRITICAL when a running run passes --max-duration, and OK while it has not', async () => {
    const box = storeBox(kind);
    const job = box.job('slow');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const log = box.path('log');
    const running = start(['-n', job, '--', fixture('hold.sh'), log, box.path('go')], box.env);
    await waitFor(() => lines(log).length > 0, 'the run to start');
    await waitFor(async () => (await cronguard(['check', job, '--max-age', '1d', '--max-duration', '1ms'], box.env)).code === 2, 'the run to be seen running');
    const crit = await check(box.env, job, '--max-age', '1d', '--max-duration', '1ms');
    const ok = await check(box.env, job, '--max-age', '1d', '--max-duration', '1d');
    release(box.path('go'));
    await running.done;
    expect(crit.stdout).toMatch(/^CRITICAL - .* has been running for .* \(over --max-duration 1ms\) \| .*running_for=[\d.]+s;;0.001;0;/);
    expect(ok).toMatchObject({ code: 0 });
    expect(ok.stdout).toMatch(/; running for /);
  });

  it('is OK for a paused job, with a note', async () => {
    const box = storeBox(kind);
    const job = box.job('paused');
    await cronguard(['migrate'], box.env);
    await box.insertRuns([{ job, status: 'failed', startedAt: ago(30 * 24 * HOUR), durationMs: 1 }]);
    await cronguard(['disable', job, '--reason', 'moving data centre', '--by', 'ops'], box.env);
    const result = await check(box.env, job, '--max-age', '1h');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^OK - ${job} is paused by ops: moving data centre \\(not checked; last has never succeeded\\)`));
  });

  it('is UNKNOWN (3) for a job that never ran, bad arguments, and a log it cannot reach', async () => {
    const box = storeBox(kind);
    await cronguard(['-n', box.job('other'), '--', 'true'], box.env);
    const cases: [string[], RegExp][] = [
      [[box.job('never'), '--max-age', '1h'], /^UNKNOWN - never\S* has never run \(no such job in the run log\)\n$/],
      [[box.job('other')], /^UNKNOWN - cronguard check: --max-age is needed: other\S* has no stored schedule to be late by \(e\.g\. --max-age 1h\)\n$/],
      [[box.job('other'), '--max-age', 'soon'], /^UNKNOWN - cronguard check: --max-age: invalid duration 'soon'/],
      [[box.job('other'), '--max-age', '1h', '--warn-age', '2h'], /^UNKNOWN - cronguard check: --warn-age must be shorter than --max-age\n$/],
      [['bad/name', '--max-age', '1h'], /^UNKNOWN - cronguard check: .*bad\/name/],
      [[box.job('other'), '--max-age', '1h', '--db', 'postgres://nobody:secret@127.0.0.1:1/none'], /^UNKNOWN - cronguard check: cannot reach PostgreSQL at .*127\.0\.0\.1:1/],
    ];
    for (const [args, message] of cases) {
      const result = await cronguard(['check', ...args], box.env);
      expect(result, args.join(' ')).toMatchObject({ code: 3, stderr: '' });
      expect(result.stdout).toMatch(message);
      expect(result.stdout).not.toContain('secret');
      expect(result.stdout.split('\n')).toHaveLength(2);
    }
  });
});
