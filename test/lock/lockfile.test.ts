import { existsSync, mkdirSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalLocks } from '../../src/lock/held.js';
import { cronguard, fixture, isAlive, lines, release, runs, sandbox, serialRuns, start, startMany, waitFor } from '../helpers.js';

describe('lockfile backend', () => {
  it('lets exactly one of several simultaneous invocations run', async () => {
    const box = sandbox();
    const log = box.path('record');
    const barrier = box.path('barrier');
    const many = startMany(8, ['-l', 'lockfile', '-n', 'lf', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => many.exited() === 7, 'all but one invocation to skip');
    await waitFor(() => lines(log).length > 0, 'the one holding the lock to start its command');
    expect(lines(log)).toEqual([expect.stringMatching(/^start \d+$/)]);
    release(barrier);
    for (const result of await many.done) expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(serialRuns(log)).toBe(1);
    expect(runs(box.stateDir)).toMatchObject([{ status: 'succeeded', overlaps: 7 }]);
    // Released: the lease is stale at once (the directory of epochs stays, as lock files do).
    expect(new LocalLocks().holder('lockfile', join(box.lockDir, 'lf.lockdir'))).toBeUndefined();
  });

  it.each([1, 2, 3])('of 24 waiters that find a stale lease at the same moment, one at a time runs (round %i)', async () => {
    const box = sandbox();
    const log = box.path('record');
    // A lease its holder stopped refreshing long ago, as a SIGKILLed wrapper leaves it.
    const container = join(box.lockDir, 'race.lockdir');
    mkdirSync(container, { recursive: true });
    writeFileSync(join(container, 'epoch-7'), 'elsewhere 1\n');
    utimesSync(join(container, 'epoch-7'), new Date(0), new Date(0));
    const all = await startMany(24, ['-l', 'lockfile', '-w', '10m', '-n', 'race', '--', fixture('record.sh'), log], box.env).done;
    for (const result of all) expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(serialRuns(log)).toBe(24);
    expect(runs(box.stateDir)).toHaveLength(24);
  });

  it('when the holder\'s wrapper is SIGKILLed, the waiters take over its lease one at a time once it is stale', async () => {
    const box = sandbox();
    const log = box.path('record');
    const holder = start(['-l', 'lockfile', '-n', 'taken', '--', fixture('hold.sh'), log, box.path('never')], box.env);
    await waitFor(() => lines(log).length === 1, 'the holder to start');
    const waiters = startMany(12, ['-l', 'lockfile', '-w', '10m', '-n', 'taken', '--', fixture('record.sh'), log], box.env);
    holder.child.kill('SIGKILL');
    await holder.done;
    for (const result of await waiters.done) expect(result).toMatchObject({ code: 0, stderr: '' });
    // The killed holder's command was ended by its watchdog: a start without an end.
    const marks = lines(log);
    expect(marks[0]).toMatch(/^start /);
    expect(serialRuns(box.path('record'), 1)).toBe(12);
  }, 120_000);

  it('terminates the command and exits 75 when the lock is compromised', async () => {
    const box = sandbox();
    const pids = box.path('pids');
    const run = start(['-l', 'lockfile', '-n', 'lost', '--kill-after', '1s', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the command to start');
    rmSync(join(box.lockDir, 'lost.lockdir'), { recursive: true });
    const result = await run.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(/lost: lock lost: lockfile .*lost\.lockdir was taken over: .*; command terminated/);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'lock_lost' });
    expect(runs(box.stateDir)[0]?.error).toMatch(/lock lost/);
  });

  it('kills the command when the wrapper is SIGKILLed, since the lock dies with the wrapper', async () => {
    const box = sandbox();
    const log = box.path('record');
    // Never released: only the parent-death signal can end this command.
    const run = start(['-l', 'lockfile', '-n', 'orphan', '--', fixture('hold.sh'), log, box.path('barrier')], box.env);
    await waitFor(() => lines(log).length > 0 && !!runs(box.stateDir)[0]?.child_pid, 'the command to start');
    const commandPid = runs(box.stateDir)[0]?.child_pid as number;
    run.child.kill('SIGKILL');
    await run.done;
    await waitFor(() => !isAlive(commandPid), 'the command to die with its wrapper');
    expect(lines(log)).toEqual([expect.stringMatching(/^start \d+$/)]);
  });

  it.each([
    ['beyond 2^53', 'epoch-9007199254740993', 'epoch-9007199254740994', 'epoch-9007199254740995'],
    ['beyond 10^20', 'epoch-99999999999999999999', 'epoch-100000000000000000000', 'epoch-100000000000000000001'],
  ])('an abandoned lease numbered %s is followed by the next number, never deleted by its own holder', async (_, old, next, after) => {
    const box = sandbox();
    const log = box.path('record');
    const container = join(box.lockDir, 'big.lockdir');
    mkdirSync(container, { recursive: true });
    writeFileSync(join(container, old), 'elsewhere 1\n');
    utimesSync(join(container, old), new Date(0), new Date(0));
    const once = () => cronguard(['-l', 'lockfile', '-n', 'big', '--', fixture('record.sh'), log], box.env);
    expect(await once()).toMatchObject({ code: 0, stderr: '' });
    expect(readdirSync(container)).toEqual([next]);
    expect(await once()).toMatchObject({ code: 0, stderr: '' });
    expect(readdirSync(container)).toEqual([after]);
    expect(serialRuns(log)).toBe(2);
  });

  it('counts only canonical epoch names: fresh files named otherwise do not hold the lease', async () => {
    const box = sandbox();
    const container = join(box.lockDir, 'odd.lockdir');
    mkdirSync(container, { recursive: true });
    for (const name of ['epoch-1e+21', 'epoch-007', 'epoch-0', 'epoch-']) writeFileSync(join(container, name), 'elsewhere 1\n');
    const result = await cronguard(['-l', 'lockfile', '-n', 'odd', '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(readdirSync(container)).toContain('epoch-1');
    expect(existsSync(box.path('ran'))).toBe(true);
  });
});
