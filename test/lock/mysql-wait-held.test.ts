import { describe, expect, it } from 'vitest';
import { collected, cronguard, fixture, lines, release, spooled, start, waitFor } from '../helpers.js';
import { mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';
import { mysqlProxy } from '../mysql-proxy.js';

// A waiter (-w) whose admission is held on its way and never answered (a proxy that paused,
// a pooler's queue in front of a server that is down) ends when its wait is over, as one whose
// server is out of reach: 69, one line. Before, the statement's own timeout (30 s) ended it,
// long past the wait. The admission never reached the server: its spooled record is dropped.
describe('mysql: a waiter whose admission is never answered', () => {
  it('-w: 69 when the wait is over, one line, nothing run; the next run drops the lost admission’s record', async () => {
    const box = mysqlSandbox();
    const job = box.job('held-wait');
    const [log, barrier, ran] = [box.path('record'), box.path('barrier'), box.path('ran')];
    const holder = start(['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const through = await mysqlProxy();
    const waiter = start(['-v', '-w', '3s', '-n', job, '--', 'sh', '-c', `echo ran >> ${ran}`], { ...box.env, CRONGUARD_DATABASE_URL: through.url });
    const said = collected(waiter);
    await waitFor(() => said.stderr().includes('is held; waiting up to 3s for it'), 'the waiter to wait');
    through.holdFrom('GET_LOCK');
    await waitFor(() => through.holding(), 'an admission to be held');
    const result = await waiter.done;
    expect(result.code).toBe(69);
    expect(result.stderr.trimEnd().split('\n').at(-1)).toMatch(/^cronguard: MySQL at [^\n]*: connection lost: no answer before the wait was over$/);
    expect(lines(ran)).toEqual([]);
    release(barrier);
    expect((await holder.done).code).toBe(0);
    // The held packet went with the waiter's connection. The next run through the same URL
    // (the spool's key) delivers the record, which finds no row of its run.
    expect(spooled(box.stateDir)).toHaveLength(1);
    through.resume();
    expect(await cronguard(['-n', job, '--', 'true'], { ...box.env, CRONGUARD_DATABASE_URL: through.url })).toMatchObject({ code: 0, stderr: '' });
    expect(spooled(box.stateDir)).toHaveLength(0);
    const rows = await mysqlQuery<{ status: string }>(`SELECT status FROM \`${box.database}\`.runs WHERE job = ? ORDER BY id`, [job]);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  }, 120_000);
});
