import { describe, expect, it } from 'vitest';
import { cronguard, lines, start } from '../helpers.js';
import { cuttingProxy } from '../pg-faults.js';
import { pgSandbox, sql } from '../pg-helpers.js';

// The alert state's statement meets a lost connection (PostgreSQL): the job's exit code is
// its own, and the failure is notified all the same; said once the log can answer again.

const alertedAt = async (schema: string, job: string) => (await sql(`SELECT alerted_at FROM "${schema}".jobs WHERE name = $1`, [job]))[0]?.alerted_at ?? null;
const claimOf = async (schema: string, job: string) => (await sql(`SELECT alert_claim FROM "${schema}".jobs WHERE name = $1`, [job]))[0]?.alert_claim ?? null;

describe.each(['request', 'reply'] as const)('the connection lost at the alert statement (%s)', (at) => {
  it('the failure notifies all the same; the exit code is the job\'s; the next failure says nothing more than the log knows', async () => {
    const box = pgSandbox();
    const job = box.job('cut');
    const file = box.path('n');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    // The statement that claims the delivery (see RunStore.wantAlert).
    const proxy = await cuttingProxy('alert_claim =', at);
    const notify = ['--notify', `echo "$CRONGUARD_EVENT $CRONGUARD_RUN_ID" >> ${file}`];
    const run = start(['-n', job, ...notify, '--', 'sh', '-c', 'exit 4'], { ...box.env, CRONGUARD_DATABASE_URL: proxy.url });
    await proxy.reached;
    proxy.cut();
    const result = await run.done;
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/: failed with exit 4 after \S+ \(run 1; cronguard logs 1\)\n/);
    expect(lines(file)).toEqual(['failed 1']);
    // At 'request' the server never took the claim: the next failure says it (the log knows
    // nothing was delivered), and the success after it the recovery. At 'reply' it took the
    // claim and the wrapper never heard: the claim holds the next outcomes back until it runs
    // out (--notify-timeout + 10 s), and the log does not know the failure went out by the
    // fallback, so no recovery follows it: the price of a reply lost at that very statement.
    expect(await alertedAt(box.schema, job)).toBeNull();
    expect((await claimOf(box.schema, job)) !== null).toBe(at === 'reply');
    expect((await cronguard(['-n', job, '--every-tick', ...notify, '--', 'false'], box.env)).code).toBe(1);
    expect(lines(file)).toEqual(at === 'reply' ? ['failed 1'] : ['failed 1', 'failed 2']);
    expect((await cronguard(['-n', job, '--every-tick', ...notify, '--', 'true'], box.env)).code).toBe(0);
    expect(lines(file)).toEqual(at === 'reply' ? ['failed 1'] : ['failed 1', 'failed 2', 'recovered 3']);
  });
});

describe('an undelivered alert in a shared log', () => {
  it('gives the state back for the next failure on any host to try again', async () => {
    const box = pgSandbox();
    const job = box.job('undelivered');
    const file = box.path('n');
    const failing = ['--notify', `echo "$CRONGUARD_EVENT" >> ${file}; exit 7`];
    expect((await cronguard(['-n', job, ...failing, '--', 'false'], box.env)).stderr).toMatch(/--notify command failed with exit 7/);
    expect(await alertedAt(box.schema, job)).toBeNull();
    const working = ['--notify', `echo "$CRONGUARD_EVENT" >> ${file}`];
    expect((await cronguard(['-n', job, '--every-tick', ...working, '--', 'false'], box.env)).stderr).not.toMatch(/--notify/);
    expect(await alertedAt(box.schema, job)).not.toBeNull();
    expect((await cronguard(['-n', job, '--every-tick', ...working, '--', 'false'], box.env)).code).toBe(1);
    expect(lines(file)).toEqual(['failed', 'failed']);
  });
});
