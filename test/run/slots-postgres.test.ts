import { appendFileSync, existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fixture, isAlive, lines, release, start, startMany, waitFor } from '../helpers.js';
import { onHost } from '../hosts.js';
import { pgRuns, pgSandbox, sql } from '../pg-helpers.js';

// --max-running N with the PostgreSQL lock kinds (issue 39): N slots, each an advisory key or a
// lease of its own; the run log records each run's slot and N, refuses a copy given another N,
// and lets N hosts start the job in one minute.

const LOCKS = ['postgres', 'lease'] as const;

interface Mark {
  readonly kind: 'start' | 'end';
  readonly ns: bigint;
  readonly slot: number;
  readonly pid: number;
}

// slot.sh's marks, in the order of the commands' clocks.
function marks(file: string): Mark[] {
  return lines(file)
    .map((l) => {
      const [kind, ns, slot, pid] = l.split(' ');
      return { kind: kind as Mark['kind'], ns: BigInt(ns as string), slot: Number(slot), pid: Number(pid) };
    })
    .sort((a, b) => (a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : 0));
}

const starts = (file: string) => lines(file).filter((l) => l.startsWith('start ')).length;

// Replays the marks: at no instant do two commands hold one slot, nor more than `n` run.
// Returns the most that ran at once.
function slotsHeld(file: string, n: number): number {
  const held = new Map<number, number>();
  let most = 0;
  for (const m of marks(file)) {
    if (m.kind === 'end') {
      expect(held.get(m.slot), `slot ${m.slot} ended by the command that held it`).toBe(m.pid);
      held.delete(m.slot);
      continue;
    }
    expect(held.has(m.slot), `slot ${m.slot} taken while held`).toBe(false);
    expect(m.slot).toBeGreaterThanOrEqual(0);
    expect(m.slot).toBeLessThan(n);
    held.set(m.slot, m.pid);
    most = Math.max(most, held.size);
  }
  return most;
}


const at = (time: string) => `2026-03-01T${time}Z`;

describe.each(LOCKS)('--max-running with -l %s', (lock) => {
  it('of 40 invocations at once with --max-running 3, exactly 3 run, each in a slot of its own; the rest skip', async () => {
    const box = pgSandbox();
    const job = box.job('forty');
    const log = box.path('marks');
    const barrier = box.path('go');
    const many = startMany(40, ['-l', lock, '--max-running', '3', '-n', job, '--', fixture('slot.sh'), log, barrier], box.env);
    // The runs hold their slots until the barrier: every other invocation finds all three held.
    await waitFor(() => many.exited() + starts(log) === 40, 'every invocation to run or skip');
    expect(starts(log)).toBe(3);
    release(barrier);
    for (const result of await many.done) expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(slotsHeld(log, 3)).toBe(3);
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => [r.status, r.max_running]).sort()).toEqual([
      ['succeeded', 3],
      ['succeeded', 3],
      ['succeeded', 3],
    ]);
    expect(rows.map((r) => r.slot).sort()).toEqual([0, 1, 2]);
    // The command was told the slot its run records.
    const slotOf = new Map(marks(log).map((m) => [m.pid, m.slot]));
    for (const row of rows) expect(slotOf.get(row.child_pid as number)).toBe(row.slot);
  });

  it('a holder SIGKILLed with its command frees its slot: the next invocation runs in it, beside the others', async () => {
    const box = pgSandbox();
    const job = box.job('killed');
    const log = box.path('marks');
    const barrier = box.path('go');
    // A lease of a holder killed is free when it expires: as short as it may be.
    const args = ['-l', lock, ...(lock === 'lease' ? ['--lease-ttl', '5s'] : []), '--max-running', '3', '-n', job];
    const holders = [0, 1, 2].map(() => start([...args, '--', fixture('slot.sh'), log, barrier], box.env));
    await waitFor(() => starts(log) === 3, 'three holders to start');
    await waitFor(async () => (await pgRuns(box.schema)).filter((r) => r.child_pid !== null).length === 3, 'their commands to be recorded');
    const victim = (await pgRuns(box.schema)).find((r) => r.slot === 1);
    const command = victim?.child_pid as number;
    // The whole of it: cronguard, and the command's process group.
    process.kill(victim?.pid as number, 'SIGKILL');
    process.kill(-command, 'SIGKILL');
    await waitFor(() => !isAlive(command) && !isAlive(victim?.pid as number), 'the holder and its command to die');
    appendFileSync(log, `end ${BigInt(Date.now()) * 1_000_000n} 1 ${command}\n`);
    // It waits (-w) for a slot rather than skip: the killed session's lock, or its lease, goes
    // when the server sees it gone.
    const next = start([...args, '-w', '10m', '--', fixture('slot.sh'), log, barrier], box.env);
    await waitFor(() => starts(log) === 4, 'the next invocation to start');
    expect(marks(log).at(-1)).toMatchObject({ kind: 'start', slot: 1 });
    release(barrier);
    expect(await next.done).toMatchObject({ code: 0, stderr: '' });
    for (const holder of holders.filter((h) => h.child.pid !== victim?.pid)) expect(await holder.done).toMatchObject({ code: 0, stderr: '' });
    expect(slotsHeld(log, 3)).toBe(3);
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => [r.slot, r.status])).toEqual(
      expect.arrayContaining([
        [1, 'abandoned'],
        [1, 'succeeded'],
      ]),
    );
    expect(rows).toHaveLength(4);
  });

  it.each([
    [3, 2],
    [1, 3],
  ])('a copy given another N than the running one (%i) is refused: 64, one line, nothing run (--max-running %i)', async (running, given) => {
    const box = pgSandbox();
    const job = box.job('disagree');
    const log = box.path('marks');
    const barrier = box.path('go');
    const holder = start(['-l', lock, '--max-running', String(running), '-n', job, '--', fixture('slot.sh'), log, barrier], box.env);
    await waitFor(() => starts(log) === 1, 'the running copy to start');
    const other = await start(['-l', lock, '--max-running', String(given), '-n', job, '--', fixture('slot.sh'), log, barrier], box.env).done;
    expect(other.code).toBe(64);
    expect(other.stdout).toBe('');
    expect(other.stderr.trim().split('\n')).toHaveLength(1);
    expect(other.stderr).toMatch(
      new RegExp(`${job} did not run: it runs with --max-running ${given} here, but host \\S+ \\(pid \\d+, run 1, since [^)]+\\) runs it with --max-running ${running}; `),
    );
    release(barrier);
    expect(await holder.done).toMatchObject({ code: 0, stderr: '' });
    expect(starts(log)).toBe(1);
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.slot, r.max_running])).toEqual([['succeeded', 0, running]]);
  });

  it('a copy given another N is refused even while every slot it would take is held', async () => {
    const box = pgSandbox();
    const job = box.job('all-held');
    const log = box.path('marks');
    const barrier = box.path('go');
    const args = ['-l', lock, '--max-running', '3', '-n', job, '--', fixture('slot.sh'), log, barrier];
    const holders = [0, 1, 2].map(() => start(args, box.env));
    await waitFor(() => starts(log) === 3, 'three copies to start');
    const other = await start(['-l', lock, '--max-running', '2', '-n', job, '--', 'true'], box.env).done;
    expect(other.code).toBe(64);
    expect(other.stderr).toMatch(new RegExp(`${job} did not run: it runs with --max-running 2 here, but .* runs it with --max-running 3; `));
    release(barrier);
    for (const holder of holders) expect(await holder.done).toMatchObject({ code: 0, stderr: '' });
    expect(starts(log)).toBe(3);
  });
});

// Kills a running copy whole (its wrapper, and its command's process group) and waits until
// both are gone.
async function killCopy(wrapper: number, command: number): Promise<void> {
  process.kill(wrapper, 'SIGKILL');
  process.kill(-command, 'SIGKILL');
  await waitFor(() => !isAlive(command) && !isAlive(wrapper), 'the copy and its command to die');
}

// Whether anyone holds a run's lock on the server now: its advisory key (in any session), or
// its lease unexpired.
async function lockHeld(schema: string, lock: (typeof LOCKS)[number], key: string): Promise<boolean> {
  const held =
    lock === 'postgres'
      ? await sql(
          `SELECT FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
              AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid`,
          [key],
        )
      : await sql(`SELECT FROM "${schema}".leases WHERE lock_key = $1::bigint AND expires_at > now()`, [key]);
  return held.length > 0;
}

// Copies on host-a, one at a time (the i-th holds slot i), each running slot.sh until its
// barrier, their commands recorded.
async function copiesOf3(schema: string, args: string[], log: string, barriers: readonly string[], env: NodeJS.ProcessEnv) {
  const copies = [];
  for (const [i, barrier] of barriers.entries()) {
    copies.push(onHost('host-a', at(`03:00:0${i + 1}`), [...args, fixture('slot.sh'), log, barrier], env));
    await waitFor(() => starts(log) === i + 1, `copy ${i} to start`);
  }
  await waitFor(async () => (await pgRuns(schema)).filter((r) => r.child_pid !== null).length === barriers.length, 'their commands to be recorded');
  return copies;
}

describe.each(LOCKS)('a copy given another N that died (-l %s)', (lock) => {
  it('a copy of 3 SIGKILLed in slot 2 does not refuse a copy of 2 once its lock is free: that one runs, the dead one is abandoned', async () => {
    const box = pgSandbox();
    const job = box.job('lowered');
    const log = box.path('marks');
    const first = box.path('go01');
    const args = (n: string) => ['-l', lock, ...(lock === 'lease' ? ['--lease-ttl', '5s'] : []), '--max-running', n, '-n', job, '--'];
    // On another host (so that only its lock tells it gone), one at a time, so that the third
    // holds slot 2; it waits on a barrier never made.
    const holders = await copiesOf3(box.schema, args('3'), log, [first, first, box.path('never')], box.env);
    const victim = (await pgRuns(box.schema)).find((r) => r.slot === 2);
    await killCopy(victim?.pid as number, victim?.child_pid as number);
    release(first);
    for (const holder of holders.slice(0, 2)) expect(await holder.done).toMatchObject({ code: 0, stderr: '' });
    // The killed session's key goes when the server sees it gone; its lease at its expiry.
    await waitFor(async () => !(await lockHeld(box.schema, lock, victim?.lock_key as string)), "the dead copy's lock to be free");
    const ran = box.path('ran');
    expect(await start([...args('2'), 'touch', ran], box.env).done).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(existsSync(ran)).toBe(true);
    expect((await pgRuns(box.schema)).map((r) => [r.slot, r.max_running, r.status])).toEqual([
      [0, 3, 'succeeded'],
      [1, 3, 'succeeded'],
      [2, 3, 'abandoned'],
      [0, 2, 'succeeded'],
    ]);
  });

  it('a copy of 3 whose slot is still held refuses a copy of 2 (64) while a dead one beside it does not', async () => {
    const box = pgSandbox();
    const job = box.job('live');
    const log = box.path('marks');
    const barrier = box.path('go');
    const args = (n: string) => ['-l', lock, ...(lock === 'lease' ? ['--lease-ttl', '5s'] : []), '--max-running', n, '-n', job, '--'];
    const holders = await copiesOf3(box.schema, args('3'), log, [barrier, box.path('never')], box.env);
    // Slot 1's copy dies; slot 0's runs on.
    const victim = (await pgRuns(box.schema)).find((r) => r.slot === 1);
    await killCopy(victim?.pid as number, victim?.child_pid as number);
    await waitFor(async () => !(await lockHeld(box.schema, lock, victim?.lock_key as string)), "the dead copy's lock to be free");
    const ran = box.path('ran');
    const refused = await start([...args('2'), 'touch', ran], box.env).done;
    expect(refused.code).toBe(64);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(new RegExp(`${job} did not run: it runs with --max-running 2 here, but host host-a \\(pid ${holders[0]?.child.pid}, run 1, `));
    expect(existsSync(ran)).toBe(false);
    release(barrier);
    expect(await holders[0]?.done).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => [r.slot, r.status])).toEqual([
      [0, 'succeeded'],
      [1, 'abandoned'],
    ]);
  });
});

describe('copies given another N under lock files, with the shared log', () => {
  it('a copy of 3 SIGKILLed on this host does not refuse a copy of 2: that one runs, the dead one is abandoned', async () => {
    const box = pgSandbox();
    const job = box.job('lowered-here');
    const log = box.path('marks');
    const first = box.path('go01');
    const args = (n: string) => ['-l', 'flock', '--max-running', n, '-n', job, '--'];
    const holders = [];
    for (const [i, barrier] of [first, first, box.path('never')].entries()) {
      holders.push(start([...args('3'), fixture('slot.sh'), log, barrier], box.env));
      await waitFor(() => starts(log) === i + 1, `copy ${i} to start`);
    }
    await waitFor(async () => (await pgRuns(box.schema)).filter((r) => r.child_pid !== null).length === 3, 'their commands to be recorded');
    const victim = (await pgRuns(box.schema)).find((r) => r.slot === 2);
    await killCopy(victim?.pid as number, victim?.child_pid as number);
    release(first);
    for (const holder of holders.slice(0, 2)) expect(await holder.done).toMatchObject({ code: 0, stderr: '' });
    const ran = box.path('ran');
    expect(await start([...args('2'), 'touch', ran], box.env).done).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(existsSync(ran)).toBe(true);
    expect((await pgRuns(box.schema)).map((r) => [r.slot, r.max_running, r.status])).toEqual([
      [0, 3, 'succeeded'],
      [1, 3, 'succeeded'],
      [2, 3, 'abandoned'],
      [0, 2, 'succeeded'],
    ]);
  });

  it("a running copy of 3 on another host holds that host's files: a copy of 2 here runs, one of 2 on that host is refused (64)", async () => {
    const box = pgSandbox();
    const job = box.job('elsewhere');
    const log = box.path('marks');
    const barrier = box.path('go');
    const onOwn = (h: string, time: string, n: string, command: string[]) =>
      onHost(`host-${h}`, at(time), ['-l', 'flock', '--max-running', n, '-n', job, '--', ...command], { ...box.env, CRONGUARD_LOCK_DIR: box.path(`locks-${h}`) });
    const three = onOwn('a', '03:00:01', '3', [fixture('slot.sh'), log, barrier]);
    await waitFor(() => starts(log) === 1, 'the copy of 3 on host-a to start');
    expect(await onOwn('b', '03:00:02', '2', ['touch', box.path('ran-b')]).done).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(existsSync(box.path('ran-b'))).toBe(true);
    const refused = await onOwn('a', '03:00:03', '2', ['touch', box.path('ran-a')]).done;
    expect(refused.code).toBe(64);
    expect(refused.stderr).toMatch(new RegExp(`${job} did not run: it runs with --max-running 2 here, but host host-a \\(pid \\d+, run 1, `));
    expect(existsSync(box.path('ran-a'))).toBe(false);
    release(barrier);
    expect(await three.done).toMatchObject({ code: 0, stderr: '' });
  });
});

describe('at most N starts a minute across a fleet (--max-running N)', () => {
  it.each([
    ['postgres', []],
    ['lease', ['-l', 'lease']],
    ['flock, with the shared log', ['-l', 'flock']],
  ])('of three hosts one after another in a minute, two run with --max-running 2; the third runs the next minute (%s)', async (_what, lockArgs) => {
    const box = pgSandbox();
    const job = box.job('tick');
    const args = (h: string): [string[], NodeJS.ProcessEnv] => [
      [...lockArgs, '-v', '--max-running', '2', '-n', job, '--', 'true'],
      // Each host has its own lock dir, as separate machines would.
      { ...box.env, CRONGUARD_LOCK_DIR: box.path(`locks-${h}`) },
    ];
    // The runs are over before the next host starts: the minute, not the lock, holds them off.
    for (const [h, time] of [['a', '03:00:01'], ['b', '03:00:02']] as const) {
      expect((await onHost(`host-${h}`, at(time), ...args(h)).done).code).toBe(0);
    }
    const third = await onHost('host-c', at('03:00:03'), ...args('c')).done;
    expect(third.code).toBe(0);
    expect(third.stderr).toMatch(/already ran this minute on host host-b/);
    expect((await onHost('host-c', at('03:01:01'), ...args('c')).done).code).toBe(0);
    expect((await pgRuns(box.schema)).map((r) => [r.host, r.tick?.toString() === new Date(at('03:00:00')).toString()])).toEqual([
      ['host-a', true],
      ['host-b', true],
      ['host-c', false],
    ]);
  });

  it.each([
    ['postgres', [], [0, 1]],
    // Every host's first free slot of a lock of its own is its slot 0; the minute is shared.
    ['flock, with the shared log', ['-l', 'flock'], [0, 0]],
  ])('two hosts at once in one minute both start with --max-running 2 (%s)', async (_what, lockArgs, slots) => {
    const box = pgSandbox();
    const job = box.job('pair');
    const log = box.path('marks');
    const barrier = box.path('go');
    const hosts = ['a', 'b'].map((h) =>
      onHost(`host-${h}`, at('03:00:01'), [...lockArgs, '--max-running', '2', '-n', job, '--', fixture('slot.sh'), log, barrier], {
        ...box.env,
        CRONGUARD_LOCK_DIR: box.path(`locks-${h}`),
      }),
    );
    await waitFor(() => starts(log) === 2, 'both hosts to start');
    release(barrier);
    for (const host of hosts) expect(await host.done).toMatchObject({ code: 0, stdout: '', stderr: '' });
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => r.host).sort()).toEqual(['host-a', 'host-b']);
    expect(rows.map((r) => r.slot).sort()).toEqual(slots);
    expect(rows.every((r) => r.tick?.toString() === new Date(at('03:00:00')).toString())).toBe(true);
  });
});
