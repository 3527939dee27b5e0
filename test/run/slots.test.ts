import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { asNobody, cronguard, type Finished, fixture, lines, release, runs, sandbox, start, waitFor } from '../helpers.js';
import { oneLine } from '../one-line.js';
import { distinctSlots, notedGone, parentOf, type SlotRun, slotRuns } from '../slot-marks.js';

// --max-running N (issue 39) on this host's locks: N slots, each a lock of its own, the first
// free one taken; the command told its slot ($CRONGUARD_SLOT) and the run log recording it.
// Barriers (files) decide how long a command holds its slot, never a sleep.

const MANY = 40;
const KINDS = [['flock'], ['lockfile']] as const;

describe('--max-running: bad input', () => {
  for (const [args, message] of [
    [['--max-running', '0'], /--max-running: '0' is not a whole number from 1 to 64/],
    [['--max-running', '65'], /--max-running: '65' is not a whole number from 1 to 64/],
    [['--max-running', '-1'], /--max-running: '-1' is not a whole number from 1 to 64/],
    [['--max-running', '1.5'], /--max-running: '1.5' is not a whole number from 1 to 64/],
    [['--max-running', ''], /--max-running: '' is not a whole number from 1 to 64/],
    [['--max-running', '3x'], /--max-running: '3x' is not a whole number from 1 to 64/],
    [['--max-running', '2', '-l', 'none'], /-l none has no lock/],
    [['--max-running', '2', '--replace'], /with --max-running there may be several/],
  ] as const) {
    it(`${args.join(' ')}: exit 64, one line, nothing run`, async () => {
      const box = sandbox();
      const result = await cronguard([...args, '-n', 'bad', '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env);
      expect(result.code).toBe(64);
      expect(oneLine(result.stderr)).toMatch(message);
      expect(lines(box.path('ran'))).toEqual([]);
    });
  }

  it('--replace goes with --max-running 01, which is 1', async () => {
    const box = sandbox();
    const result = await cronguard(['--max-running', '01', '--replace', '-n', 'one', '--', 'sh', '-c', `echo "$CRONGUARD_SLOT" >> ${box.path('ran')}`], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(lines(box.path('ran'))).toEqual(['0']);
  });
});

describe.each(KINDS)('--max-running 3 (-l %s)', (kind) => {
  const args = (job: string, ...more: string[]) => ['-l', kind, '--max-running', '3', ...more, '-n', job, '--'];

  it(`${MANY} invocations at once: exactly 3 run, in slots 0, 1 and 2, the rest skip silently`, async () => {
    const box = sandbox();
    const marks = box.path('marks');
    const barrier = box.path('barrier');
    let exited = 0;
    const all = Array.from({ length: MANY }, () => start([...args('many'), fixture('slot.sh'), marks, barrier], box.env).done.finally(() => exited++));
    // The 3 that got a slot hold it until the barrier exists, so every other one met all 3 held.
    await waitFor(() => exited === MANY - 3, `all but 3 of ${MANY} invocations to skip`, 300_000);
    await waitFor(() => slotRuns(marks).length === 3, 'the 3 holding a slot to start their commands');
    expect(slotRuns(marks).map((r) => r.slot).sort()).toEqual([0, 1, 2]);
    release(barrier);
    const results: Finished[] = await Promise.all(all);
    expect(results.filter((x) => x.code !== 0 || x.stderr !== '')).toEqual([]);
    expect(distinctSlots(marks, 3)).toBe(3);
    expect(runs(box.stateDir).map((r) => [r.status, r.slot, r.max_running]).sort()).toEqual([
      ['succeeded', 0, 3],
      ['succeeded', 1, 3],
      ['succeeded', 2, 3],
    ]);
  }, 400_000);

  it('waiters (-w) take each slot as it frees: every one runs, never two in a slot, never more than 3', async () => {
    const box = sandbox();
    const marks = box.path('marks');
    const barrier = box.path('barrier');
    const all = Array.from({ length: 10 }, () => start([...args('waiters', '-w', '10m'), fixture('slot.sh'), marks, barrier], box.env).done);
    await waitFor(() => slotRuns(marks).length === 3, 'the first 3 to hold a slot');
    release(barrier);
    const results: Finished[] = await Promise.all(all);
    expect(results.filter((x) => x.code !== 0 || x.stderr !== '')).toEqual([]);
    expect(slotRuns(marks)).toHaveLength(10);
    expect(distinctSlots(marks, 3)).toBe(3);
  }, 300_000);

  it('a SIGKILLed holder of slot 1 frees it for the next; only its run is abandoned', async () => {
    const box = sandbox();
    const marks = box.path('marks');
    const barrier = box.path('barrier');
    const holders = Array.from({ length: 3 }, () => start([...args('killed'), fixture('slot.sh'), marks, barrier], box.env).done);
    await waitFor(() => slotRuns(marks).length === 3, 'the 3 to hold a slot');
    const victim = slotRuns(marks).find((r) => r.slot === 1);
    if (!victim) throw new Error('nobody holds slot 1');
    process.kill(parentOf(victim.pid), 'SIGKILL');
    process.kill(victim.pid, 'SIGKILL');
    await notedGone(marks, victim);
    // Slots 0 and 2 are held: a waiter can only get slot 1 (a lockfile's once it is stale).
    const next = start([...args('killed', '-w', '5m'), fixture('slot.sh'), marks, barrier], box.env);
    await waitFor(() => slotRuns(marks).length === 4, 'the waiter to get the freed slot', 120_000);
    expect(slotRuns(marks)[3]?.slot).toBe(1);
    const rows = runs(box.stateDir);
    expect(rows.map((r) => [r.slot, r.status]).sort()).toEqual([
      [0, 'running'],
      [1, 'abandoned'],
      [1, 'running'],
      [2, 'running'],
    ]);
    release(barrier);
    const results = await Promise.all([...holders, next.done]);
    expect(results.filter((x) => x.code !== 0)).toHaveLength(1);
    expect(distinctSlots(marks, 3)).toBe(3);
    expect(runs(box.stateDir).map((r) => [r.slot, r.status]).sort()).toEqual([
      [0, 'succeeded'],
      [1, 'abandoned'],
      [1, 'succeeded'],
      [2, 'succeeded'],
    ]);
  }, 300_000);

  it('a running copy given another N: the newcomer is refused with 64 and one line, nothing run', async () => {
    const box = sandbox();
    const marks = box.path('marks');
    const barrier = box.path('barrier');
    const holder = start([...args('disagree'), fixture('slot.sh'), marks, barrier], box.env).done;
    await waitFor(() => slotRuns(marks).length === 1, 'the first to hold slot 0');
    const other = await cronguard(['-l', kind, '--max-running', '2', '-n', 'disagree', '--', 'touch', box.path('ran')], box.env);
    expect(other.code).toBe(64);
    expect(oneLine(other.stderr)).toMatch(/disagree did not run: it runs with --max-running 2 here, but .* runs it with --max-running 3; give every line that runs it the same --max-running$/);
    expect(lines(box.path('ran'))).toEqual([]);
    release(barrier);
    expect(await holder).toMatchObject({ code: 0 });
  });
});

// Makes the job's only run look like a copy of it still running on another host, under `lock`
// (its row otherwise as recorded).
function runningElsewhere(stateDir: string, lock: string): void {
  const Database = createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
  const db = new Database(join(stateDir, 'cronguard.db'));
  try {
    db.prepare(`UPDATE runs SET status = 'running', finished_at = NULL, exit_code = NULL, host = 'elsewhere', pid = 4242, lock_backend = ?`).run(lock);
  } finally {
    db.close();
  }
}

describe.each(KINDS)('--max-running lowered (-l %s)', (kind) => {
  const args = (job: string, n: string) => ['-l', kind, '--max-running', n, '-n', job, '--'];

  it('a copy of 3 SIGKILLed in slot 2 does not refuse a copy of 2: that one runs, the dead one is abandoned', async () => {
    const box = sandbox();
    const marks = box.path('marks');
    const first = box.path('go01');
    const copies = [];
    // One at a time, so that the third holds slot 2; it waits on a barrier never made.
    for (const [i, barrier] of [first, first, box.path('never')].entries()) {
      copies.push(start([...args('lowered', '3'), fixture('slot.sh'), marks, barrier], box.env).done);
      await waitFor(() => slotRuns(marks).length === i + 1, `copy ${i} to start`);
    }
    const victim = slotRuns(marks)[2] as SlotRun;
    expect(victim.slot).toBe(2);
    process.kill(parentOf(victim.pid), 'SIGKILL');
    process.kill(victim.pid, 'SIGKILL');
    await notedGone(marks, victim);
    release(first);
    expect((await Promise.all(copies)).map((r) => r.code)).toEqual([0, 0, null]);
    const ran = box.path('ran');
    expect(await cronguard([...args('lowered', '2'), 'touch', ran], box.env)).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(existsSync(ran)).toBe(true);
    expect(runs(box.stateDir).map((r) => [r.slot, r.max_running, r.status])).toEqual([
      [0, 3, 'succeeded'],
      [1, 3, 'succeeded'],
      [2, 3, 'abandoned'],
      [0, 2, 'succeeded'],
    ]);
  });

  it("another host's copy of 3 under its own lock files does not refuse a copy of 2 here; one under a Redis lock does (64)", async () => {
    const box = sandbox();
    expect((await cronguard([...args('elsewhere', '3'), 'true'], box.env)).code).toBe(0);
    runningElsewhere(box.stateDir, kind);
    const ran = box.path('ran');
    expect(await cronguard([...args('elsewhere', '2'), 'touch', ran], box.env)).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(existsSync(ran)).toBe(true);
    rmSync(ran);
    // The log cannot ask Redis whether that copy still holds its slot.
    runningElsewhere(box.stateDir, 'redis');
    const refused = await cronguard([...args('elsewhere', '2'), 'touch', ran], box.env);
    expect(refused.code).toBe(64);
    expect(oneLine(refused.stderr)).toMatch(/elsewhere did not run: it runs with --max-running 2 here, but host elsewhere \(pid 4242, run 1, .* runs it with --max-running 3; /);
    expect(existsSync(ran)).toBe(false);
  });
});

describe('--max-running with flock files', () => {
  it('--lock-file shared by two jobs: the 3 slots belong to the lock, whichever job holds them', async () => {
    const box = sandbox();
    const marks = box.path('marks');
    const barrier = box.path('barrier');
    const file = box.path('pool.lock');
    const job = (name: string) => ['--lock-file', file, '--max-running', '3', '-n', name, '--', fixture('slot.sh'), marks, barrier];
    const a1 = start(job('a'), box.env).done;
    await waitFor(() => slotRuns(marks).length === 1, 'a to hold slot 0');
    const b = start(job('b'), box.env).done;
    await waitFor(() => slotRuns(marks).length === 2, 'b to hold slot 1');
    const a2 = start(job('a'), box.env).done;
    await waitFor(() => slotRuns(marks).length === 3, 'a again to hold slot 2');
    expect(slotRuns(marks).map((r) => r.slot)).toEqual([0, 1, 2]);
    for (const name of ['a', 'b']) expect(await cronguard(job(name), box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(slotRuns(marks)).toHaveLength(3);
    release(barrier);
    expect((await Promise.all([a1, b, a2])).map((r) => r.code)).toEqual([0, 0, 0]);
    expect(distinctSlots(marks, 3)).toBe(3);
  });

  it("a symlink planted as a slot's lock file is not followed: 73, its target never created, nothing run", async () => {
    const box = sandbox();
    const marks = box.path('marks');
    const barrier = box.path('barrier');
    const holder = start(['--max-running', '2', '-n', 'j', '--', fixture('slot.sh'), marks, barrier], box.env).done;
    await waitFor(() => slotRuns(marks).length === 1, 'the first to hold slot 0');
    symlinkSync(box.path('elsewhere'), join(box.lockDir, 'j.lock#1'));
    const result = await cronguard(['--max-running', '2', '-n', 'j', '--', 'touch', box.path('ran')], box.env);
    expect(result.code).toBe(73);
    expect(oneLine(result.stderr)).toMatch(/lock file \S+j\.lock#1/);
    expect(existsSync(box.path('elsewhere'))).toBe(false);
    expect(lines(box.path('ran'))).toEqual([]);
    release(barrier);
    expect(await holder).toMatchObject({ code: 0 });
  });

  it.skipIf(asNobody.length === 0)('a stranger holding slot 1 while a run of the job holds slot 0 is said, as one holding slot 0 would be', async () => {
    const box = sandbox();
    chmodSync(box.dir, 0o755);
    mkdirSync(box.lockDir, { mode: 0o777 });
    chmodSync(box.lockDir, 0o777);
    const slot1 = join(box.lockDir, 'j.lock#1');
    const held = join(box.lockDir, 'held');
    spawn(asNobody[0] as string, [...asNobody.slice(1), 'sh', '-c', `umask 022; touch '${slot1}'; exec flock '${slot1}' sh -c 'touch ${held}; sleep 600'`], { env: box.env, stdio: 'ignore' });
    await waitFor(() => existsSync(held), 'the stranger to hold slot 1');
    const marks = box.path('marks');
    const barrier = box.path('barrier');
    const holder = start(['--max-running', '2', '-n', 'j', '--', fixture('slot.sh'), marks, barrier], box.env).done;
    await waitFor(() => slotRuns(marks).length === 1, 'a run to hold slot 0');
    const skipped = await cronguard(['--max-running', '2', '-n', 'j', '--', 'touch', box.path('ran')], box.env);
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toMatch(/cronguard: j did not run: its lock \(flock \S+j\.lock#1\) is held by user nobody \(uid 65534\), pid \d+, who does not share this job; stop that process\n$/);
    expect(lines(box.path('ran'))).toEqual([]);
    release(barrier);
    expect(await holder).toMatchObject({ code: 0 });
  });
});
