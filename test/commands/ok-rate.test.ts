import { describe, expect, it } from 'vitest';
import { cronguard, fixture } from '../helpers.js';
import { serve } from '../serve/serve-helpers.js';
import { STORES, storeBox } from '../stores.js';

// OK% is the share of invocations that succeeded, judged by their last attempts: a failure
// that --retries made good is not a failed run.
describe.each(STORES)('OK%% counts invocations, not attempts (%s)', (kind) => {
  it('a job mended on its second attempt is 100% in status, its detail, --json and the web page; one that never was is 50%', async () => {
    const box = storeBox(kind);
    const job = box.job('mended');
    const flaky = (log: string, failures: string) => ['-n', job, '--retries', '1', '--retry-delay', '10ms', '--', fixture('flaky.sh'), box.path(log), failures, '5'];
    expect((await cronguard(flaky('a', '1'), box.env)).code).toBe(0);
    expect((await box.runs()).map((r) => r.status)).toEqual(['failed', 'succeeded']);
    const [mended] = JSON.parse((await cronguard(['status', job, '--json'], box.env)).stdout) as { success_rate: number; recent: { retried: boolean }[] }[];
    expect(mended?.success_rate).toBe(1);
    expect(mended?.recent.map((r) => r.retried)).toEqual([true, false]);
    expect((await cronguard(['status'], box.env)).stdout).toMatch(new RegExp(`^${job} +idle +succeeded .* 100% `, 'm'));
    expect((await cronguard(['status', job], box.env)).stdout).toContain('100% of the last 1 succeeded;');
    const server = await serve([], box.env);
    expect(await (await server.get('/')).text()).toContain('<td data-label="OK">100%</td>');
    expect(await (await server.get(`/jobs/${job}`)).text()).toMatch(/<\/svg> 100% ok;/);
    // A second invocation that fails both attempts: one of two invocations succeeded.
    expect((await cronguard(flaky('b', '2'), box.env)).code).toBe(5);
    const [after] = JSON.parse((await cronguard(['status', job, '--json'], box.env)).stdout) as { success_rate: number }[];
    expect(after?.success_rate).toBe(0.5);
    expect((await cronguard(['status', job], box.env)).stdout).toContain('50% of the last 2 succeeded;');
  });
});
