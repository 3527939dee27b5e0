import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, isAlive, lines, release, type Sandbox, type Started, start, startMany, waitFor } from '../helpers.js';
import { onHost as startOnHost } from '../hosts.js';
import { type MysqlSandbox, mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';

// --max-running N with MySQL as lock and log (issue 39): N slots of the job's lock, each
// invocation in the first free one; the rows say which; copies given another N are refused;
// and the fleet's rule is at most N starts a minute.

// slot.sh FILE BARRIER: notes "start SLOT PID NS" in FILE on the command's own clock, waits
// until the test creates BARRIER (or its sandbox is gone), then notes "end SLOT PID NS".
const SLOT_SH = `#!/bin/sh
echo "start $CRONGUARD_SLOT $$ $(date +%s%N)" >> "$1"
while [ ! -e "$2" ] && [ -d "\${2%/*}" ]; do sleep 0.02; done
echo "end $CRONGUARD_SLOT $$ $(date +%s%N)" >> "$1"
`;

function slotScript(box: Sandbox): string {
  const file = box.path('slot.sh');
  writeFileSync(file, SLOT_SH);
  chmodSync(file, 0o755);
  return file;
}

interface Mark {
  readonly kind: 'start' | 'end';
  readonly slot: number;
  readonly pid: number;
  readonly ns: bigint;
}

const marksOf = (file: string): Mark[] =>
  lines(file).map((l) => {
    const [kind, slot, pid, ns] = l.split(' ');
    return { kind: kind as Mark['kind'], slot: Number(slot), pid: Number(pid), ns: BigInt(ns as string) };
  });

// Walks the commands' own marks in time order (a start before an end of the same instant,
// so that touching runs count as overlapping): at every instant at most `n` run and no two in
// one slot. Returns the slots of the runs, in the order they started.
function slotsAtOnce(file: string, n: number): number[] {
  const marks = marksOf(file).sort((a, b) => (a.ns === b.ns ? (a.kind === 'start' ? -1 : 1) : a.ns < b.ns ? -1 : 1));
  const running = new Map<number, number>();
  const started: number[] = [];
  for (const m of marks) {
    if (m.kind === 'start') {
      expect(running.has(m.slot), `slot ${m.slot} taken twice at once`).toBe(false);
      running.set(m.slot, m.pid);
      expect(running.size).toBeLessThanOrEqual(n);
      started.push(m.slot);
    } else {
      expect(running.get(m.slot)).toBe(m.pid);
      running.delete(m.slot);
    }
  }
  expect(running.size).toBe(0);
  return started;
}

interface SlotRow {
  id: number;
  status: string;
  slot: number | null;
  max_running: number | null;
  overlaps: number;
  host: string;
}

const rowsOf = (database: string, job: string) =>
  mysqlQuery<SlotRow>(`SELECT id, status, slot, max_running, overlaps, host FROM \`${database}\`.runs WHERE job = ? ORDER BY id`, [job]);

// The lock kinds of a MySQL fleet: GET_LOCK (one name per slot) and the lease (one key per
// slot, each with its own fencing token).
const KINDS = [
  ['mysql', []],
  ['lease', ['--lease-ttl', '5s']],
] as const;

describe.each(KINDS)('--max-running 3 under -l %s', (kind, extra) => {
  const lockArgs = ['-l', kind, ...extra];

  it('of 40 simultaneous invocations exactly 3 run, in distinct slots; the rows record slot and N', async () => {
    const box = mysqlSandbox();
    const job = box.job('forty');
    const log = box.path('marks');
    const barrier = box.path('barrier');
    const script = slotScript(box);
    // The tables exist first, so the 40 race for the slots, not for creating them.
    expect((await cronguard(['-n', box.job('first'), '--', 'true'], box.env)).code).toBe(0);
    const many = startMany(40, [...lockArgs, '--max-running', '3', '-n', job, '--', script, log, barrier], box.env);
    await waitFor(() => many.exited() === 37, 'all but three invocations to skip');
    await waitFor(() => lines(log).length === 3, 'the three holding a slot to start their commands');
    release(barrier);
    for (const result of await many.done) expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(slotsAtOnce(log, 3).sort()).toEqual([0, 1, 2]);
    const rows = await rowsOf(box.database, job);
    expect(rows.map((r) => [r.status, r.max_running])).toEqual([
      ['succeeded', 3],
      ['succeeded', 3],
      ['succeeded', 3],
    ]);
    expect(rows.map((r) => r.slot).sort()).toEqual([0, 1, 2]);
    // Every skip is counted, on one of the runs.
    expect(rows.reduce((sum, r) => sum + r.overlaps, 0)).toBe(37);
  });

  it('a holder SIGKILLed with its command frees its slot: the next invocation runs in it', async () => {
    const box = mysqlSandbox();
    const job = box.job('killed');
    const log = box.path('marks');
    const barrier = box.path('barrier');
    const script = slotScript(box);
    const args = [...lockArgs, '--max-running', '3', '-n', job, '--', script, log, barrier];
    const holders = [];
    // One at a time, so slot i is the i-th holder's.
    for (let i = 0; i < 3; i++) {
      holders.push(start(args, box.env));
      await waitFor(() => lines(log).length === i + 1, `holder ${i} to start its command`);
    }
    expect(marksOf(log).map((m) => m.slot)).toEqual([0, 1, 2]);
    const full = await cronguard(args, box.env);
    expect(full).toMatchObject({ code: 0, stderr: '' });
    expect(lines(log)).toHaveLength(3);
    // The whole of the slot 1 holder: cronguard, and its command's process group.
    const command = (marksOf(log)[1] as Mark).pid;
    holders[1]?.child.kill('SIGKILL');
    process.kill(-command, 'SIGKILL');
    await holders[1]?.done;
    await waitFor(() => !isAlive(command), 'the killed command to be gone');
    // Tried until one runs: a lease frees at its expiry, GET_LOCK once the server sees the
    // connection close. A try that finds every slot still held skips.
    const tried: { runner?: Started } = {};
    await waitFor(async () => {
      const attempt = start(args, box.env);
      let exited = false;
      void attempt.done.then(() => (exited = true));
      await waitFor(() => exited || lines(log).length > 3, 'the try to skip or run');
      if (lines(log).length > 3) tried.runner = attempt;
      return tried.runner !== undefined;
    }, 'an invocation to run in the freed slot');
    expect(marksOf(log).map((m) => m.slot)).toEqual([0, 1, 2, 1]);
    release(barrier);
    for (const holder of [...holders.filter((_, i) => i !== 1), tried.runner]) expect((await holder?.done)?.code).toBe(0);
    const rows = await rowsOf(box.database, job);
    // The killed one's row is abandoned by the admission that took its slot.
    expect(rows.filter((r) => r.slot === 1).map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
    expect(rows.filter((r) => r.slot !== 1).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });

  it('copies given another N are refused with 64 and one line: in a free slot, and with every slot of theirs held', async () => {
    const box = mysqlSandbox();
    const job = box.job('disagree');
    const log = box.path('marks');
    const barrier = box.path('barrier');
    const ran = box.path('ran');
    const script = slotScript(box);
    const three = [...lockArgs, '--max-running', '3', '-n', job, '--', script, log, barrier];
    const two = [...lockArgs, '--max-running', '2', '-n', job, '--', 'touch', ran];
    const holders = [start(three, box.env)];
    await waitFor(() => lines(log).length === 1, 'the first holder to start its command');
    // Slot 1 is free for it: its admission finds the running copy of 3.
    const free = await cronguard(two, box.env);
    expect(free.code).toBe(64);
    expect(free.stderr.trim().split('\n')).toHaveLength(1);
    expect(free.stderr).toMatch(new RegExp(`${job} did not run: it runs with --max-running 2 here, but .* runs it with --max-running 3; give every line that runs it the same --max-running`));
    for (let i = 1; i < 3; i++) {
      holders.push(start(three, box.env));
      await waitFor(() => lines(log).length === i + 1, `holder ${i} to start its command`);
    }
    // Slots 0 and 1 both held: the holder found is a copy of 3, not a skip.
    const held = await cronguard(two, box.env);
    expect(held.code).toBe(64);
    expect(held.stderr.trim().split('\n')).toHaveLength(1);
    expect(held.stderr).toMatch(/runs it with --max-running 3/);
    release(barrier);
    for (const holder of holders) expect((await holder.done).code).toBe(0);
    expect(lines(ran)).toEqual([]);
    const rows = await rowsOf(box.database, job);
    expect(rows.map((r) => [r.status, r.max_running, r.overlaps])).toEqual([
      ['succeeded', 3, 0],
      ['succeeded', 3, 0],
      ['succeeded', 3, 0],
    ]);
  });
});


// A fleet host's invocation (test/hosts.ts), to its end.
const onHost = (name: string, clock: string, args: string[], env: NodeJS.ProcessEnv) => startOnHost(name, clock, args, env).done;

const at = (time: string) => `2026-03-01T${time}Z`;

// Whether anyone holds a run's lock on the server now: its GET_LOCK name, or its lease unexpired.
async function lockHeld(database: string, kind: (typeof KINDS)[number][0], key: string): Promise<boolean> {
  if (kind === 'mysql') return (await mysqlQuery<{ used: unknown }>('SELECT IS_USED_LOCK(?) AS used', [key]))[0]?.used != null;
  return (await mysqlQuery(`SELECT 1 FROM \`${database}\`.leases WHERE lock_key = ? AND expires_at > UTC_TIMESTAMP(6)`, [key])).length > 0;
}

// The lock key of the job's run in `slot`.
const keyOf = async (database: string, job: string, slot: number) =>
  (await mysqlQuery<{ lock_key: string }>(`SELECT lock_key FROM \`${database}\`.runs WHERE job = ? AND slot = ?`, [job, slot]))[0]?.lock_key as string;

describe.each(KINDS)('a copy given another N that died (-l %s)', (kind, extra) => {
  const args = (job: string, n: string) => ['-l', kind, ...extra, '--max-running', n, '-n', job, '--'];

  // Copies of 3 on host-a (so that only its lock tells one gone), one at a time (the i-th
  // holds slot i), each waiting on its barrier.
  async function copiesOf3(box: Sandbox, job: string, log: string, barriers: readonly string[]): Promise<Started[]> {
    const script = slotScript(box);
    const copies: Started[] = [];
    for (const [i, barrier] of barriers.entries()) {
      copies.push(startOnHost('host-a', at(`03:00:0${i + 1}`), [...args(job, '3'), script, log, barrier], box.env));
      await waitFor(() => lines(log).length === i + 1, `copy ${i} to start its command`);
    }
    return copies;
  }

  // The whole of a copy: cronguard, and its command's process group; and then its lock free.
  async function kill(box: MysqlSandbox, job: string, copy: Started, command: number, slot: number): Promise<void> {
    copy.child.kill('SIGKILL');
    process.kill(-command, 'SIGKILL');
    await copy.done;
    await waitFor(() => !isAlive(command), 'the killed command to be gone');
    // GET_LOCK's name goes once the server sees the connection close; a lease at its expiry.
    const key = await keyOf(box.database, job, slot);
    await waitFor(async () => !(await lockHeld(box.database, kind, key)), "the dead copy's lock to be free");
  }

  it('a copy of 3 SIGKILLed in slot 2 does not refuse a copy of 2 once its lock is free: that one runs, the dead one is abandoned', async () => {
    const box = mysqlSandbox();
    const job = box.job('lowered');
    const log = box.path('marks');
    const first = box.path('go01');
    const copies = await copiesOf3(box, job, log, [first, first, box.path('never')]);
    await kill(box, job, copies[2] as Started, (marksOf(log)[2] as Mark).pid, 2);
    release(first);
    for (const copy of copies.slice(0, 2)) expect((await copy.done).code).toBe(0);
    const ran = box.path('ran');
    expect(await cronguard([...args(job, '2'), 'touch', ran], box.env)).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(existsSync(ran)).toBe(true);
    expect((await rowsOf(box.database, job)).map((r) => [r.slot, r.max_running, r.status])).toEqual([
      [0, 3, 'succeeded'],
      [1, 3, 'succeeded'],
      [2, 3, 'abandoned'],
      [0, 2, 'succeeded'],
    ]);
  });

  it('a live copy of 3 still refuses a copy of 2 (64) when a dead one is the newest running', async () => {
    const box = mysqlSandbox();
    const job = box.job('live');
    const log = box.path('marks');
    const barrier = box.path('barrier');
    const copies = await copiesOf3(box, job, log, [barrier, box.path('never')]);
    await kill(box, job, copies[1] as Started, (marksOf(log)[1] as Mark).pid, 1);
    const ran = box.path('ran');
    const refused = await cronguard([...args(job, '2'), 'touch', ran], box.env);
    expect(refused.code).toBe(64);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(new RegExp(`${job} did not run: it runs with --max-running 2 here, but host host-a \\(pid ${copies[0]?.child.pid}, run 1, `));
    expect(existsSync(ran)).toBe(false);
    release(barrier);
    expect((await copies[0]?.done)?.code).toBe(0);
    expect((await rowsOf(box.database, job)).map((r) => [r.slot, r.status, r.overlaps])).toEqual([
      [0, 'succeeded', 0],
      [1, 'abandoned', 0],
    ]);
  });
});

describe('--max-running 2 across a fleet: at most 2 starts a minute', () => {
  it.each([
    ['the MySQL lock', ['-l', 'mysql']],
    // Every host's own flock is its slot 0: the minute's second start is still the job's.
    ['local flocks with the MySQL log', ['-l', 'flock']],
  ])('quick runs one after another: two hosts start in a minute, a third skips; the next minute is anyone\'s (%s)', async (_what, lockArgs) => {
    const box = mysqlSandbox();
    const job = box.job('tick');
    const args = [...lockArgs, '--max-running', '2', '-n', job, '--', 'true'];
    expect(await onHost('host-a', at('03:00:01'), args, box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(await onHost('host-b', at('03:00:02'), args, box.env)).toMatchObject({ code: 0, stderr: '' });
    const c = await onHost('host-c', at('03:00:03'), ['-v', ...args], box.env);
    expect(c.code).toBe(0);
    expect(c.stderr).toMatch(/already ran this minute on host host-[ab]/);
    // The same host may start again in its minute (its claim is its own).
    expect(await onHost('host-a', at('03:00:04'), args, box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(await onHost('host-c', at('03:01:01'), args, box.env)).toMatchObject({ code: 0, stderr: '' });
    const rows = await rowsOf(box.database, job);
    expect(rows.map((r) => [r.host, r.status, r.max_running])).toEqual([
      ['host-a', 'succeeded', 2],
      ['host-b', 'succeeded', 2],
      ['host-a', 'succeeded', 2],
      ['host-c', 'succeeded', 2],
    ]);
  });

  it("a running copy of 3 on another host holds that host's files (flock): a copy of 2 on a third runs, one of 2 on that host is refused (64)", async () => {
    const box = mysqlSandbox();
    const job = box.job('elsewhere');
    const log = box.path('marks');
    const barrier = box.path('barrier');
    const script = slotScript(box);
    const onOwn = (h: string, time: string, n: string, command: string[]) =>
      startOnHost(`host-${h}`, at(time), ['-l', 'flock', '--max-running', n, '-n', job, '--', ...command], { ...box.env, CRONGUARD_LOCK_DIR: box.path(`locks-${h}`) });
    const three = onOwn('a', '03:00:01', '3', [script, log, barrier]);
    await waitFor(() => lines(log).length === 1, 'the copy of 3 on host-a to start its command');
    expect(await onOwn('b', '03:00:02', '2', ['touch', box.path('ran-b')]).done).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(existsSync(box.path('ran-b'))).toBe(true);
    const refused = await onOwn('a', '03:00:03', '2', ['touch', box.path('ran-a')]).done;
    expect(refused.code).toBe(64);
    expect(refused.stderr).toMatch(new RegExp(`${job} did not run: it runs with --max-running 2 here, but host host-a \\(pid \\d+, run 1, `));
    expect(existsSync(box.path('ran-a'))).toBe(false);
    release(barrier);
    expect(await three.done).toMatchObject({ code: 0, stderr: '' });
  });

  it('two hosts holding both slots start in the same minute; a third finds none', async () => {
    const box = mysqlSandbox();
    const job = box.job('held');
    const log = box.path('marks');
    const barrier = box.path('barrier');
    const script = slotScript(box);
    const args = ['--max-running', '2', '-n', job, '--', script, log, barrier];
    const a = onHost('host-a', at('03:00:01'), args, box.env);
    await waitFor(() => lines(log).length === 1, 'host-a to start its command');
    const b = onHost('host-b', at('03:00:02'), args, box.env);
    await waitFor(() => lines(log).length === 2, 'host-b to start its command');
    expect(await onHost('host-c', at('03:00:03'), args, box.env)).toMatchObject({ code: 0, stderr: '' });
    release(barrier);
    expect(await a).toMatchObject({ code: 0, stderr: '' });
    expect(await b).toMatchObject({ code: 0, stderr: '' });
    expect(slotsAtOnce(log, 2)).toEqual([0, 1]);
    const rows = await rowsOf(box.database, job);
    expect(rows.map((r) => [r.host, r.slot])).toEqual([
      ['host-a', 0],
      ['host-b', 1],
    ]);
  });
});
