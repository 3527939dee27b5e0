import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, isAlive, lines, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// Runs cronguard as another host (see stop-postgres.test.ts).
const asHost = (name: string) => ['unshare', '--uts', 'sh', '-c', 'hostname "$0" && exec "$@"', name];

// --replace: the running copy is stopped (as `cronguard stop` does), recorded killed and
// replaced by the new run's id; the new run then runs as usual.
describe.each(STORES)('--replace (%s)', (kind) => {
  it('stops the running copy on this host, its whole tree, and runs this one', async () => {
    const box = storeBox(kind);
    const job = box.job('replace');
    const [pids, ran] = [box.path('pids'), box.path('ran')];
    const old = start(['-n', job, '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the old tree to start');
    const replacing = await cronguard(['-n', job, '--replace', '--', 'sh', '-c', 'echo new >> "$0"', ran], box.env);
    expect(replacing).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(lines(ran)).toEqual(['new']);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    const ended = await old.done;
    expect(ended.code).toBe(143);
    expect(ended.stderr).toMatch(/stopped by root@.* \(cronguard --replace, pid \d+\): killed by SIGTERM after/);
    const [first, second] = await box.runs();
    expect(second).toMatchObject({ status: 'succeeded', exit_code: 0 });
    expect(first).toMatchObject({ status: 'killed', signal: 'SIGTERM' });
    expect(first?.error).toMatch(new RegExp(`^replaced by run ${second?.id} on ${hostname()}; stopped by root@${hostname()} \\(cronguard --replace, pid \\d+\\): killed by SIGTERM`));
  });

  it('with nothing running, runs as usual; with --no-log it is refused', async () => {
    const box = storeBox(kind);
    const job = box.job('alone');
    expect(await cronguard(['-n', job, '--replace', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect((await box.runs()).map((r) => [r.status, r.error])).toEqual([['succeeded', null]]);
    const refused = await cronguard(['-n', job, '--replace', '--no-log', '--', 'true'], box.env);
    expect(refused).toMatchObject({ code: 64, stderr: 'cronguard: --replace finds the running copy in the run log; it cannot go with --no-log (see cronguard --help)\n' });
  });
});

// The copy runs on another host (a UTS namespace named web2) under the fleet's lock: the
// request reaches it through the log, and the lock comes free for this one.
describe.each(['postgres', 'mysql'] as const)('--replace through the shared log (%s)', (kind) => {
  it('stops the copy on another host and runs here once its lock is free', async () => {
    const box = storeBox(kind);
    const job = box.job('fleet-replace');
    const [pids, ran] = [box.path('pids'), box.path('ran')];
    const old = start(['-n', job, '--', fixture('tree.sh'), pids], box.env, asHost('web2'));
    await waitFor(() => lines(pids).length === 3, 'the old tree to start');
    // --every-tick: the copy may have started in this same minute, which makes it the fleet's
    // run of the minute, not one to replace (see replace.ts).
    const replacing = await cronguard(['-n', job, '--replace', '--every-tick', '--', 'sh', '-c', 'echo new >> "$0"', ran], box.env);
    expect(replacing).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual(['new']);
    expect((await old.done).code).toBe(143);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    const [first, second] = await box.runs();
    expect(first).toMatchObject({ host: 'web2', status: 'killed' });
    expect(second).toMatchObject({ host: hostname(), status: 'succeeded' });
    expect(first?.error).toMatch(new RegExp(`^replaced by run ${second?.id} on ${hostname()}; stopped by root@${hostname()} \\(cronguard --replace, pid \\d+\\)`));
  });
});

// A copy that another host started in this same minute is the fleet's run of that tick:
// --replace (without --every-tick) leaves it and skips, else hosts that all run --replace
// would stop each other every minute. Across a minute's edge the copy is an older tick's,
// and is replaced: which one happened is read from the ticks, and each is checked.
describe('--replace and the fleet rule (postgres)', () => {
  it("does not replace another host's run of the same tick", async () => {
    const box = storeBox('postgres');
    const job = box.job('tick');
    const [pids, ran] = [box.path('pids'), box.path('ran')];
    const old = start(['-n', job, '--', fixture('tree.sh'), pids], box.env, asHost('web2'));
    await waitFor(() => lines(pids).length === 3, 'the old tree to start');
    const before = new Date();
    const replacing = await cronguard(['-n', job, '--replace', '--', 'sh', '-c', 'echo new >> "$0"', ran], box.env);
    const after = new Date();
    expect(replacing.code).toBe(0);
    const [first] = await box.runs();
    // Whether the invocation fell in the old run's minute: certain unless the minute turned
    // while it ran, when only what it did can tell (it found the tick taken, or a new one).
    const minuteOf = (at: Date) => Math.floor(at.getTime() / 60_000) * 60_000;
    const sameTick = Date.parse(first?.tick ?? '') === minuteOf(before) && (minuteOf(after) === minuteOf(before) || lines(ran).length === 0);
    if (sameTick) {
      expect(lines(ran)).toEqual([]);
      expect((await box.runs()).map((r) => r.status)).toEqual(['running']);
      for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(true);
      old.child.kill('SIGTERM');
    } else {
      expect(lines(ran)).toEqual(['new']);
    }
    await old.done;
  });
});

// Two --replace invocations on two hosts race to replace one run: both ask it to stop, one
// runs at once, the other after it (waiting for the lock). The replaced run names the run
// that replaced it, and its host, once: the first replacer's (issue 35, item 14).
describe.each(['postgres', 'mysql'] as const)('two --replace racing (%s)', (kind) => {
  it('the replaced run names the run, and the host, that replaced it', async () => {
    const box = storeBox(kind);
    const job = box.job('race');
    const pids = box.path('pids');
    const old = start(['-n', job, '--', fixture('tree.sh'), pids], box.env, asHost('web1'));
    await waitFor(() => lines(pids).length === 3, 'the old tree to start');
    const racing = ['web2', 'web3'].map((host) => start(['-n', job, '--replace', '--every-tick', '-w', '1m', '--', 'true'], box.env, asHost(host)));
    for (const done of await Promise.all(racing.map((r) => r.done))) expect(done).toMatchObject({ code: 0, stderr: '' });
    expect((await old.done).code).toBe(143);
    const [first, ...next] = await box.runs();
    const replacer = next.sort((a, b) => Date.parse(String(a.started_at)) - Date.parse(String(b.started_at)))[0];
    expect(first).toMatchObject({ host: 'web1', status: 'killed' });
    expect(first?.error).toMatch(new RegExp(`^replaced by run ${replacer?.id} on ${replacer?.host}; stopped by root@web[23] `));
  });
});

