import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, isAlive, lines, release, start, waitFor } from '../helpers.js';
import { mysqlQuery } from '../mysql-helpers.js';
import { sql } from '../pg-helpers.js';
import { STORES, storeBox } from '../stores.js';

// A prefix that runs cronguard as another host: its own UTS namespace, named `name`, with
// the same run log (the machine runs the tests as root).
const asHost = (name: string) => ['unshare', '--uts', 'sh', '-c', 'hostname "$0" && exec "$@"', name];

const pidsIn = (file: string) => lines(file).map(Number);
// How a run's error begins: on a machine this loaded, a note about the command's pipes may
// follow it (see relay.ts), which is not what these tests are about.
const startsWith = (text: string) => new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`);

// `cronguard stop` on each store: the whole tree dies, grandchildren included; the row says
// who stopped it; the exit codes are the documented ones.
describe.each(STORES)('stop (%s)', (kind) => {
  it('stops a run on this host: its command, the grandchildren, recorded killed by whom', async () => {
    const box = storeBox(kind);
    const job = box.job('tree');
    const pids = box.path('pids');
    const run = start(['-n', job, '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the tree to start');
    const stopped = await cronguard(['stop', job], box.env);
    expect(stopped.code).toBe(0);
    expect(stopped.stderr).toMatch(new RegExp(`^cronguard stop: run \\d+ \\(${job} on ${hostname()}\\) killed: stopped by root@${hostname()} \\(cronguard stop\\): killed by SIGTERM`));
    for (const pid of pidsIn(pids)) expect(isAlive(pid)).toBe(false);
    const ended = await run.done;
    expect(ended.code).toBe(143);
    expect(ended.stderr).toMatch(/stopped by root@.* \(cronguard stop\): killed by SIGTERM after/);
    const [row] = await box.runs();
    expect(row).toMatchObject({ status: 'killed', signal: 'SIGTERM' });
    expect(row?.error).toMatch(startsWith(`stopped by root@${hostname()} (cronguard stop): killed by SIGTERM`));
  });

  it('--signal sends that signal; a run id names the run; a second stop finds nothing to stop', async () => {
    const box = storeBox(kind);
    const job = box.job('int');
    const pids = box.path('pids');
    // sh's background children ignore SIGINT: they end by the SIGKILL after --kill-after.
    const run = start(['-n', job, '--kill-after', '1s', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the tree to start');
    const [running] = await box.runs();
    expect(await cronguard(['stop', String(running?.id), '--signal', 'INT'], box.env)).toMatchObject({ code: 0 });
    expect((await run.done).code).toBe(130);
    expect((await box.runs())[0]).toMatchObject({ status: 'killed', signal: 'SIGINT' });
    const again = await cronguard(['stop', String(running?.id)], box.env);
    expect(again).toMatchObject({ code: 2, stdout: '', stderr: `cronguard stop: run ${running?.id} of ${job} is not running (killed); nothing to stop\n` });
    expect(await cronguard(['stop', job], box.env)).toMatchObject({ code: 2, stderr: `cronguard stop: ${job} is not running; nothing to stop\n` });
  });

  it('a group that ignores the signal gets SIGKILL after the job\'s --kill-after', async () => {
    const box = storeBox(kind);
    const job = box.job('trap');
    const pids = box.path('pids');
    const run = start(['-n', job, '--kill-after', '1s', '--', fixture('tree.sh'), pids, 'trap'], box.env);
    await waitFor(() => lines(pids).length === 3, 'the tree to start');
    expect(await cronguard(['stop', job], box.env)).toMatchObject({ code: 0 });
    for (const pid of pidsIn(pids)) expect(isAlive(pid)).toBe(false);
    expect((await run.done).code).toBe(137);
    const [row] = await box.runs();
    expect(row).toMatchObject({ status: 'killed', signal: 'SIGKILL' });
    expect(row?.error).toMatch(startsWith(`stopped by root@${hostname()} (cronguard stop), then SIGKILL after 1s: killed by SIGKILL`));
  });

  it('--wait D bounds the wait: 124 while it still runs, and the stop goes on', async () => {
    const box = storeBox(kind);
    const job = box.job('slow');
    const [marks, barrier] = [box.path('marks'), box.path('go')];
    const run = start(['-n', job, '--kill-after', '1h', '--', fixture('stubborn.sh'), marks, barrier], box.env);
    await waitFor(() => lines(marks).length === 1, 'the command to start');
    const stopped = await cronguard(['stop', job, '--wait', '300ms'], box.env);
    expect(stopped.code).toBe(124);
    expect(stopped.stderr).toMatch(/^cronguard stop: run \d+ \(.*\) is still running after 300ms; it was asked to stop \(cronguard history .*\)\n$/);
    expect(lines(marks)).toContain('term');
    expect((await box.runs())[0]?.status).toBe('running');
    release(barrier);
    const ended = await run.done;
    expect(ended.code).toBe(0);
    // It ended on its own after the stop: still recorded as stopped, with its exit.
    expect((await box.runs())[0]).toMatchObject({ status: 'killed', exit_code: 0, error: `stopped by root@${hostname()} (cronguard stop): exited 0` });
  });

  it('bad inputs: one line, the documented code, nothing stopped', async () => {
    const box = storeBox(kind);
    const job = box.job('bad');
    await cronguard(['-n', job, '--', 'true'], box.env);
    expect(await cronguard(['stop', box.job('nosuch')], box.env)).toMatchObject({ code: 1, stdout: '', stderr: `cronguard stop: no job ${box.job('nosuch')} in the run log\n` });
    expect(await cronguard(['stop', '999999'], box.env)).toMatchObject({ code: 1, stderr: 'cronguard stop: no run with id 999999\n' });
    expect(await cronguard(['stop', job, '--signal', 'NOPE'], box.env)).toMatchObject({
      code: 64,
      stderr: "cronguard stop: --signal: unknown signal 'NOPE' (use e.g. TERM, INT, HUP, KILL or a number) (see cronguard stop --help)\n",
    });
    expect(await cronguard(['stop', job, '--wait', 'soon'], box.env)).toMatchObject({ code: 64 });
    expect(await cronguard(['stop'], box.env)).toMatchObject({ code: 64, stderr: "cronguard stop: missing required argument 'run' (see cronguard stop --help)\n" });
    expect(await cronguard(['stop', 'a b'], box.env)).toMatchObject({ code: 64 });
    expect((await box.runs()).map((r) => r.status)).toEqual(['succeeded']);
  });
});

describe('stop, wrapper and signals (sqlite)', () => {
  it('a signal to the wrapper alone is no stop: the row says the signal, not a stopper', async () => {
    const box = storeBox('sqlite');
    const pids = box.path('pids');
    const run = start(['-n', 'outside', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the tree to start');
    // An outside SIGUSR2 (the doorbell) with no request behind it changes nothing.
    run.child.kill('SIGUSR2');
    run.child.kill('SIGTERM');
    expect((await run.done).code).toBe(143);
    const [row] = await box.runs();
    expect(row?.error).toMatch(startsWith('killed by SIGTERM (forwarded by cronguard)'));
  });

  it('a wrapper that was SIGKILLed: its command group is stopped and the run recorded', async () => {
    const box = storeBox('sqlite');
    const pids = box.path('pids');
    // flock: the lock lives with the command, so nothing ends it with the wrapper.
    const run = start(['-n', 'orphan', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the tree to start');
    // The tree may start before its wrapper recorded the command's pid, which is what stop
    // finds its group by: killed before that, it is the case left out (nothing to stand in for).
    await waitFor(async () => (await box.runs())[0]?.child_pid != null, 'the command pid to be recorded');
    run.child.kill('SIGKILL');
    await run.done;
    for (const pid of pidsIn(pids)) expect(isAlive(pid)).toBe(true);
    const stopped = await cronguard(['stop', 'orphan'], box.env);
    expect(stopped.code).toBe(0);
    for (const pid of pidsIn(pids)) expect(isAlive(pid)).toBe(false);
    const [row] = await box.runs();
    expect(row).toMatchObject({ status: 'killed', signal: 'SIGTERM' });
    expect(row?.error).toMatch(/^stopped by root@.* \(cronguard stop\): its wrapper \(pid \d+\) was gone; 3 processes of its command stopped$/);
    // Its lock is free: the next run runs.
    expect(await cronguard(['-n', 'orphan', '--', 'true'], box.env)).toMatchObject({ code: 0 });
  });
});

// Another host: the wrapper in a UTS namespace named web2, the stop from this one, through
// the shared log only (the doorbell cannot reach it: the request is what it polls).
describe.each(['postgres', 'mysql'] as const)('stop through the shared log (%s)', (kind) => {
  it('a run on another host is stopped by its own wrapper within seconds', async () => {
    const box = storeBox(kind);
    const job = box.job('fleet');
    const pids = box.path('pids');
    const run = start(['-n', job, '--', fixture('tree.sh'), pids], box.env, asHost('web2'));
    await waitFor(() => lines(pids).length === 3, 'the tree to start');
    expect((await box.runs())[0]?.host).toBe('web2');
    const stopped = await cronguard(['stop', job], box.env);
    expect(stopped.code).toBe(0);
    expect(stopped.stderr).toMatch(new RegExp(`^cronguard stop: run \\d+ \\(${job} on web2\\) killed: stopped by root@${hostname()} \\(cronguard stop\\): killed by SIGTERM`));
    expect((await run.done).code).toBe(143);
    for (const pid of pidsIn(pids)) expect(isAlive(pid)).toBe(false);
  });
});

// The wrapper's look for a stop request failing (its table gone) changes nothing: the run
// ends as it would have, with no word about it, and -v counts the looks apart.
describe.each(['postgres', 'mysql'] as const)('a failing look for a stop request (%s)', (kind) => {
  it('leaves the run, its exit and its record as they would have been', async () => {
    const box = storeBox(kind);
    const job = box.job('poll-fails');
    const [marks, barrier] = [box.path('marks'), box.path('go')];
    const run = start(['-v', '-n', job, '--', fixture('hold.sh'), marks, barrier], box.env);
    await waitFor(() => lines(marks).length === 1, 'the command to start');
    const table = kind === 'postgres' ? `"${(box as unknown as { schema: string }).schema}".stop_requests` : `\`${(box as unknown as { database: string }).database}\`.stop_requests`;
    if (kind === 'postgres') await sql(`DROP TABLE ${table}`);
    else await mysqlQuery(`DROP TABLE ${table}`);
    // Long enough for the wrapper to look (every 2 s): waited for, not asserted.
    const dropped = Date.now();
    await waitFor(() => Date.now() - dropped > 4500, 'two looks');
    release(barrier);
    const ended = await run.done;
    expect(ended.code).toBe(0);
    expect(ended.stderr).toMatch(/ round trips? \+ \d+ heartbeats? \+ \d+ stop polls? after connecting/);
    expect(ended.stderr).not.toMatch(/warn|unavailable|stop_requests/i);
    expect((await box.runs())[0]).toMatchObject({ status: 'succeeded', exit_code: 0, error: null });
  });
});
