import { describe, expect, it } from 'vitest';
import { cronguard, type Finished, fixture, lines, release, sandbox, start, waitFor } from '../helpers.js';
import { haveRedis, type PrivateRedis, privateRedis, REDIS_SERVER } from '../redis-server.js';
import { distinctSlots, notedGone, parentOf, slotRuns } from '../slot-marks.js';

// --max-running N with -l redis (issue 39): a lease per slot (cronguard:P:JOB, then
// cronguard:P:JOB#1 ...), each with a fencing counter of its own, and the fleet's one run per
// tick kept per slot: at most N starts a minute.

const MANY = 40;

describe.skipIf(!haveRedis)(haveRedis ? '--max-running with -l redis' : `--max-running with -l redis: skipped, ${REDIS_SERVER} is missing`, () => {
  let redis: PrivateRedis | null = null;
  const server = async () => (redis ??= await privateRedis());

  it(`${MANY} invocations at once, each with a log of its own (as many hosts): exactly 3 run, each slot's fencing tokens its own and growing`, async () => {
    const r = await server();
    const box = sandbox();
    const marks = box.path('marks');
    const barrier = box.path('barrier');
    const invoke = (i: number, wait: string[]) =>
      start(['--lock-url', r.url(), '--every-tick', '--max-running', '3', ...wait, '-n', 'many', '--', fixture('slot.sh'), marks, barrier], { ...box.env, CRONGUARD_STATE_DIR: box.path(`state-${i}`) }).done;
    let exited = 0;
    const all = Array.from({ length: MANY }, (_, i) => invoke(i, []).finally(() => exited++));
    await waitFor(() => exited === MANY - 3, `all but 3 of ${MANY} invocations to skip`, 300_000);
    await waitFor(() => slotRuns(marks).length === 3, 'the 3 holding a slot to start their commands');
    expect(slotRuns(marks).map((run) => run.slot).sort()).toEqual([0, 1, 2]);
    release(barrier);
    const results: Finished[] = await Promise.all(all);
    expect(results.filter((x) => x.code !== 0 || x.stderr !== '')).toEqual([]);
    // Then as many waiting (-w), the barrier down: they take the slots as they free.
    const waiters: Finished[] = await Promise.all(Array.from({ length: MANY }, (_, i) => invoke(MANY + i, ['-w', '10m'])));
    expect(waiters.filter((x) => x.code !== 0 || x.stderr !== '')).toEqual([]);
    expect(slotRuns(marks)).toHaveLength(3 + MANY);
    expect(distinctSlots(marks, 3)).toBe(3);
    for (const slot of [0, 1, 2]) {
      const tokens = slotRuns(marks).filter((run) => run.slot === slot).map((run) => BigInt(run.token));
      expect(tokens.length).toBeGreaterThan(0);
      expect(tokens).toEqual([...tokens].sort((a, b) => (a < b ? -1 : 1)));
      expect(new Set(tokens).size).toBe(tokens.length);
      const key = slot === 0 ? 'cronguard:0:many' : `cronguard:0:many#${slot}`;
      expect(r.cli('EXISTS', `${key}:fence`)).toBe('1');
      expect(r.cli('EXISTS', key)).toBe('0');
    }
  }, 400_000);

  it('a SIGKILLed holder of slot 1 frees it once its lease lapses: the next takes slot 1, with a greater token', async () => {
    const r = await server();
    const box = sandbox();
    const marks = box.path('marks');
    const barrier = box.path('barrier');
    const invoke = (i: number, ...more: string[]) =>
      start(['--lock-url', r.url(), '--every-tick', '--lease-ttl', '5s', '--max-running', '3', ...more, '-n', 'killed', '--', fixture('slot.sh'), marks, barrier], { ...box.env, CRONGUARD_STATE_DIR: box.path(`state-${i}`) }).done;
    const holders = [0, 1, 2].map((i) => invoke(i));
    await waitFor(() => slotRuns(marks).length === 3, 'the 3 to hold a slot');
    const victim = slotRuns(marks).find((run) => run.slot === 1);
    if (!victim) throw new Error('nobody holds slot 1');
    process.kill(parentOf(victim.pid), 'SIGKILL');
    process.kill(victim.pid, 'SIGKILL');
    await notedGone(marks, victim);
    // Slots 0 and 2 are held: the waiter can only get slot 1, once its key has expired.
    const next = invoke(3, '-w', '5m');
    await waitFor(() => slotRuns(marks).length === 4, 'the waiter to get the freed slot', 120_000);
    const taken = slotRuns(marks)[3];
    expect(taken?.slot).toBe(1);
    expect(BigInt(taken?.token ?? 0)).toBeGreaterThan(BigInt(victim.token));
    release(barrier);
    const results = await Promise.all([...holders, next]);
    expect(results.filter((x) => x.code !== 0)).toHaveLength(1);
    expect(distinctSlots(marks, 3)).toBe(3);
  }, 300_000);

  it("a minute whose slot 0 another host started in is no reason to skip: the run takes slot 1, and claims that slot's minute", async () => {
    const r = await server();
    const box = sandbox();
    // This minute and the next (the invocation may start after it turns).
    const minutes = [0, 60_000].map((ms) => new Date(Date.now() + ms).toISOString().slice(0, 16));
    for (const m of minutes) r.cli('SET', `cronguard:0:ticked:tick:${m}`, 'other-host', 'PX', '120000');
    const ran = box.path('ran');
    const result = await cronguard(['--lock-url', r.url(), '--max-running', '3', '-n', 'ticked', '--', 'sh', '-c', `echo "$CRONGUARD_SLOT" >> ${ran}`], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(lines(ran)).toEqual(['1']);
    const claimed = r.cli('KEYS', 'cronguard:0:ticked#1:tick:*').split('\n');
    expect(claimed).toHaveLength(1);
    // Every slot's minute another host's: skipped, as with one slot.
    for (const slot of ['#1', '#2']) for (const m of minutes) r.cli('SET', `cronguard:0:ticked${slot}:tick:${m}`, 'other-host', 'PX', '120000');
    const skipped = await cronguard(['--lock-url', r.url(), '-v', '--max-running', '3', '-n', 'ticked', '--', 'sh', '-c', `echo "$CRONGUARD_SLOT" >> ${ran}`], box.env);
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toMatch(/already ran this minute on host other-host/);
    expect(lines(ran)).toEqual(['1']);
  });
});
