import { describe, expect, it, onTestFinished } from 'vitest';
import { cronguard, lines, spooled, start, waitFor } from '../helpers.js';
import { cuttingProxy } from '../pg-faults.js';
import { pgRuns, pgSandbox, sql } from '../pg-helpers.js';

// The reply to the admission is lost under the postgres lock (the default with a database):
// the server committed the claim, the wrapper ran nothing (69). Its request was never
// served: the next run must serve it, not end it failed.
describe('a claim whose admission reply was lost, under the postgres lock', () => {
  it('is served by the next run, once, with its arguments', async () => {
    const box = pgSandbox();
    const job = box.job('pglost');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const waiter = start(['request', job, '--wait', '--', 'hello'], box.env);
    onTestFinished(() => void waiter.child.kill());
    const requests = () => sql(`SELECT status, run_id, exit_code FROM "${box.schema}".requests`);
    await waitFor(async () => (await requests()).length === 1, 'the request');
    const proxy = await cuttingProxy('.admit(', 'reply');
    const viaProxy = { ...box.env, CRONGUARD_DATABASE_URL: proxy.url };
    const ran = box.path('ran');
    const args = ['-n', job, '--on-request', '--', 'sh', '-c', 'echo "[$*]" >> "$0"', ran];
    const first = await cronguard(args, viaProxy);
    await proxy.reached;
    expect(first.code).toBe(69);
    expect(lines(ran)).toEqual([]);
    expect(spooled(box.stateDir)).toHaveLength(1);
    expect(await requests()).toEqual([expect.objectContaining({ status: 'running' })]);

    // The next run takes the lock: the row of the lost admission ran nothing, so its claim
    // goes back and this run serves it.
    expect(await cronguard(args, viaProxy)).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual(['[hello]']);
    expect(spooled(box.stateDir)).toEqual([]);
    const runs = await pgRuns(box.schema);
    expect(runs.map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
    expect(await requests()).toEqual([{ status: 'succeeded', run_id: runs[1]?.id, exit_code: 0 }]);
    expect((await waiter.done).code).toBe(0);
  });
});
