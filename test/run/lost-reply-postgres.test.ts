import { existsSync } from 'node:fs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { cronguard, fixture, lines, spooled, start, waitFor } from '../helpers.js';
import { onHost } from '../hosts.js';
import { cuttingProxy } from '../pg-faults.js';
import { pgRuns, pgSandbox, sql } from '../pg-helpers.js';


const at = (time: string) => `2026-03-01T${time}Z`;

describe('the reply to the admission is lost (the server committed it)', () => {
  it('nothing runs (69, one line); the tick stays free for the fleet; the row is settled as not run', async () => {
    const box = pgSandbox();
    const job = box.job('lost');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const proxy = await cuttingProxy('.admit(', 'reply');
    const hostA = { ...box.env, CRONGUARD_DATABASE_URL: proxy.url };
    const lost = await onHost('host-a', at('03:00:01'), ['-n', job, '--', 'touch', box.path('ran-a')], hostA).done;
    await proxy.reached;
    expect(lost.code).toBe(69);
    expect(lost.stderr).toMatch(/^cronguard: [^\n]+\n$/);
    expect(existsSync(box.path('ran-a'))).toBe(false);
    // The server did commit it: a `running` row that claimed the minute, and nothing behind it.
    expect((await pgRuns(box.schema)).map((r) => [r.host, r.status])).toEqual([['host-a', 'running']]);
    expect(spooled(box.stateDir)).toHaveLength(1);

    // Another host, in the same minute, takes the lock and runs: the tick was never served.
    const other = { ...box.env, CRONGUARD_STATE_DIR: box.path('state-b') };
    expect(await onHost('host-b', at('03:00:30'), ['-n', job, '--', 'touch', box.path('ran-b')], other).done).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(box.path('ran-b'))).toBe(true);

    // host-a's next run delivers the record: the row says why nothing ran.
    expect(await onHost('host-a', at('03:01:05'), ['-n', job, '--', 'true'], hostA).done).toMatchObject({ code: 0, stderr: '' });
    expect(spooled(box.stateDir)).toEqual([]);
    expect((await pgRuns(box.schema)).map((r) => [r.host, r.status, r.error])).toEqual([
      ['host-a', 'abandoned', 'connection lost before the command started; nothing ran'],
      ['host-b', 'succeeded', null],
      ['host-a', 'succeeded', null],
    ]);
  });

  it('a tick whose run started its command stays served, though its wrapper is gone', async () => {
    const box = pgSandbox();
    const job = box.job('served');
    const a = onHost('host-a', at('03:00:01'), ['-n', job, '--', fixture('hold.sh'), box.path('log'), box.path('never')], box.env);
    await waitFor(async () => (await pgRuns(box.schema))[0]?.child_pid != null, 'the command to start');
    a.child.kill('SIGKILL');
    await a.done;
    const other = { ...box.env, CRONGUARD_STATE_DIR: box.path('state-b') };
    expect(await onHost('host-b', at('03:00:30'), ['-n', job, '--', 'touch', box.path('ran-b')], other).done).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(box.path('ran-b'))).toBe(false);
    expect((await pgRuns(box.schema)).map((r) => [r.host, r.status, r.overlaps])).toEqual([['host-a', 'abandoned', 1]]);
  });

  it('under a local lock, a request the lost statement claimed is served by the next run, never lost', async () => {
    const box = pgSandbox();
    const job = box.job('claimed');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const waiter = start(['request', job, '--wait', '--', 'hello'], box.env);
    onTestFinished(() => void waiter.child.kill());
    const requests = () => sql(`SELECT status, run_id, exit_code FROM "${box.schema}".requests`);
    await waitFor(async () => (await requests()).length === 1, 'the request');
    const proxy = await cuttingProxy('.admit(', 'reply');
    const viaProxy = { ...box.env, CRONGUARD_DATABASE_URL: proxy.url };
    const ran = box.path('ran');
    const args = ['-l', 'flock', '-n', job, '--on-request', '--', 'sh', '-c', 'echo "[$*]" >> "$0"', ran];
    // The server claimed the request for a run whose wrapper never heard so: the job runs as
    // with a log that cannot answer, without the request's arguments, and is spooled.
    const first = await cronguard(args, viaProxy);
    await proxy.reached;
    expect(first.code).toBe(0);
    expect(lines(ran)).toEqual(['[]']);
    expect(spooled(box.stateDir)).toHaveLength(1);
    expect(await requests()).toEqual([expect.objectContaining({ status: 'running' })]);

    // The next run delivers the record and gives the claim back: the request is served once,
    // with its arguments, and its waiter hears that run's code.
    expect(await cronguard(args, viaProxy)).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual(['[]', '[hello]']);
    expect(spooled(box.stateDir)).toEqual([]);
    const runs = await pgRuns(box.schema);
    expect(runs.map((r) => [r.trigger, r.status])).toEqual([['request', 'succeeded'], ['request', 'succeeded']]);
    expect(await requests()).toEqual([{ status: 'succeeded', run_id: runs[1]?.id, exit_code: 0 }]);
    expect((await waiter.done).code).toBe(0);
  });
});
