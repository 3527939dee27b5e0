import { describe, expect, it } from 'vitest';
import { cronguard, lines, start, waitFor } from '../helpers.js';
import { cuttingProxy } from '../pg-faults.js';
import { pgRuns, pgSandbox } from '../pg-helpers.js';

// The run log's connection cut while the wrapper asked it for a stop request (a database
// restart, a failover, a NAT that dropped the idle session): the log is back a moment later,
// yet the wrapper's looks all failed on the dead session for the rest of the run, so no
// `stop` (from this host or any other) reached it, and `stop` waited for the command's
// natural end. From a breaker of issue 25 item 3.
describe('stop after the log connection was cut during a look (postgres)', () => {
  it('a later stop still reaches the wrapper: the run is stopped and recorded once', async () => {
    const box = pgSandbox();
    const job = box.job('cut');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    // The wrapper's first look for a stop request is held, then its connection cut (-l flock:
    // the lock does not go with the session).
    const proxy = await cuttingProxy('stop_requests', 'request');
    const marks = box.path('marks');
    const run = start(['-v', '-n', job, '-l', 'flock', '--', 'sh', '-c', `echo started >> '${marks}'; exec sleep 600`], { ...box.env, CRONGUARD_DATABASE_URL: proxy.url });
    await waitFor(() => lines(marks).length === 1, 'the command to start');
    await proxy.reached;
    proxy.cut();
    // Several looks over the fresh session (one every 2 s), each counted as a stop poll.
    await waitFor(() => proxy.sent() >= 5, 'looks over the fresh session');
    // Bounded so that a stop that is never heard fails the test (124) instead of hanging.
    const stopped = await cronguard(['stop', job, '--wait', '2m'], box.env);
    expect(stopped.stderr).toMatch(/killed: stopped by root@.* \(cronguard stop\)/);
    expect(stopped.code).toBe(0);
    const ended = await run.done;
    expect(ended.code).toBe(143);
    // -v counts the statements of the fresh session too, the looks over it among them: the
    // count was negative (issue 35, item 11).
    expect(ended.stderr).toMatch(new RegExp(`${job}: \\d+ PostgreSQL round trips? \\+ \\d+ stop polls? after connecting`));
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => r.status)).toEqual(['killed']);
  });
});
