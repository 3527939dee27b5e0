import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

const statusOf = async (env: NodeJS.ProcessEnv, ...args: string[]) => {
  const result = await cronguard(['status', '--json', ...args], env);
  expect(result).toMatchObject({ code: 0, stderr: '' });
  return JSON.parse(result.stdout) as Record<string, unknown>[];
};

describe.each(STORES)('status (%s)', (kind) => {
  it('shows each job running, idle or paused, with its last result, last success and waiting requests', async () => {
    const box = storeBox(kind);
    const [ok, bad, busy, paused] = ['ok', 'bad', 'busy', 'paused'].map((n) => box.job(n)) as [string, string, string, string];
    await cronguard(['-n', ok, '--', 'true'], box.env);
    await cronguard(['-n', bad, '--', 'true'], box.env);
    await cronguard(['-n', bad, '--', 'sh', '-c', 'exit 3'], box.env);
    await cronguard(['disable', paused, '--reason', 'upgrade'], box.env);
    await box.request(paused);
    const log = box.path('log');
    const running = start(['-n', busy, '--', fixture('hold.sh'), log, box.path('go')], box.env);
    await waitFor(() => lines(log).length > 0, 'the busy job to start');
    const jobs = await statusOf(box.env);
    const table = await cronguard(['status'], box.env);
    release(box.path('go'));
    await running.done;
    const byName = Object.fromEntries(jobs.map((j) => [j.job, j]));
    expect(byName[ok]).toMatchObject({ state: 'idle', last_status: 'succeeded', last_exit_code: 0, pending_requests: 0 });
    expect(byName[ok]?.last_success_at).toBe(byName[ok]?.last_started_at);
    expect(byName[bad]).toMatchObject({ state: 'idle', last_status: 'failed', last_exit_code: 3 });
    expect(Date.parse(String(byName[bad]?.last_success_at))).toBeLessThan(Date.parse(String(byName[bad]?.last_started_at)));
    expect(byName[busy]).toMatchObject({ state: 'running', running_host: hostname(), last_status: null });
    expect(byName[paused]).toMatchObject({ state: 'disabled', disabled_reason: 'upgrade', pending_requests: 1, last_run_id: null });
    expect(table.stdout).toMatch(/^JOB\s+STATE\s+LAST\s+AGO\s+OK AGO\s/);
    expect(table.stdout).toMatch(/paused: upgrade/);
  });

  it('one job by name; an unknown one is "not found" (1)', async () => {
    const box = storeBox(kind);
    await cronguard(['-n', box.job('one'), '--', 'true'], box.env);
    expect((await statusOf(box.env, box.job('one'))).map((j) => j.job)).toEqual([box.job('one')]);
    const missing = await cronguard(['status', box.job('other')], box.env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^cronguard status: no job \S+ in the run log\n$/);
  });
});
