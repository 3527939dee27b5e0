import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, serialRuns, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

describe.each(STORES)('repeating within the minute (%s)', (kind) => {
  it('--every starts the command every period, start to start, never overlapping', async () => {
    const box = storeBox(kind);
    const job = box.job('poll');
    const log = box.path('log');
    const loop = start(['-n', job, '--every', '400ms', '--for', '1h', '--', fixture('args.sh'), log], box.env);
    // However slow each start on a busy machine: three runs, whenever they come.
    // (The log is made by the first run: until then it has no table to read.)
    await waitFor(async () => (await box.runs().catch(() => [])).filter((r) => r.status === 'succeeded').length >= 3, 'three runs');
    loop.child.kill('SIGTERM');
    await loop.done;
    serialRuns(log);
    const starts = (await box.runs()).map((r) => Date.parse(String(r.started_at)));
    for (let i = 1; i < starts.length; i++) expect((starts[i] as number) - (starts[i - 1] as number)).toBeGreaterThanOrEqual(400);
  });

  it('--for ends the loop: no run starts after the window, and the loop exits 0', async () => {
    const box = storeBox(kind);
    const job = box.job('window');
    const log = box.path('log');
    const result = await cronguard(['-n', job, '--every', '400ms', '--for', '2s', '--', fixture('args.sh'), log], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const starts = (await box.runs()).map((r) => Date.parse(String(r.started_at)));
    // At least the first run, however slow the machine; how many more is the machine's speed.
    expect(starts.length).toBeGreaterThanOrEqual(1);
    for (const s of starts) expect(s - (starts[0] as number)).toBeLessThan(2000);
  });

  // Issue 36, item 10: requests reset the period's clock, so requests coming more often than
  // the period held its own runs off for good. The period keeps its own clock now.
  it('requests coming faster than the period do not hold its own runs off', async () => {
    const box = storeBox(kind);
    const job = box.job('busy');
    // Each run a fifth of a second: requests served one after another fill the period.
    const loop = start(['-n', job, '--every', '2s', '--for', '1h', '--', 'sleep', '0.2'], box.env);
    try {
      await waitFor(async () => (await box.runs().catch(() => [])).length >= 1, 'the first run');
      // One request at a time, the next as soon as the last is served: up to 60 of them,
      // until the period has started two runs of its own meanwhile.
      const periodic = async () => (await box.runs()).filter((r) => r.trigger !== 'request').length;
      const before = await periodic();
      for (let i = 0; i < 60 && (await periodic()) < before + 2; i++) {
        const id = await box.request(job);
        await waitFor(async () => (await box.requests()).some((r) => r.id === id && r.status === 'succeeded'), 'the request to be served');
      }
      expect(await periodic()).toBeGreaterThanOrEqual(before + 2);
    } finally {
      loop.child.kill('SIGTERM');
      await loop.done;
    }
  });

  // Issue 36, item 11: a new invocation's first run came right at its hand-over, as little as
  // a second after the last one of the invocation before. Its first run now keeps the period,
  // to a fraction of a second, whoever started the last one.
  it('the next invocation\'s first run keeps the period after the last run of the one before', async () => {
    const box = storeBox(kind);
    const job = box.job('handover');
    const args = (window: string) => ['-n', job, '--every', '2s', '--for', window, '--', 'true'];
    const first = start(args('3s'), box.env);
    await waitFor(async () => (await box.runs().catch(() => [])).length >= 1, 'the first invocation to run');
    // The second waits for the lock (a loop's hand-over), takes over when the first's window
    // ends, and is stopped once it has run.
    const second = start(args('1h'), box.env);
    expect((await first.done).code).toBe(0);
    await waitFor(async () => (await box.runs()).some((r) => r.pid === second.child.pid), 'the second invocation to run');
    second.child.kill('SIGTERM');
    await second.done;
    const starts = (await box.runs()).map((r) => Date.parse(String(r.started_at))).sort((a, b) => a - b);
    for (let i = 1; i < starts.length; i++) expect((starts[i] as number) - (starts[i - 1] as number)).toBeGreaterThanOrEqual(2000 - 250);
  });

  it('a run longer than the period delays the next one rather than overlapping it', async () => {
    const box = storeBox(kind);
    const job = box.job('long');
    const log = box.path('log');
    const barrier = box.path('go');
    const loop = start(['-n', job, '--every', '100ms', '--for', '1h', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length === 1, 'the first run to start');
    release(barrier);
    await waitFor(() => lines(log).filter((l) => l.startsWith('start')).length >= 3, 'more runs');
    loop.child.kill('SIGTERM');
    await loop.done;
    serialRuns(log);
  });

  it('a signal during one of its runs ends the loop with that run\'s one summary line', async () => {
    const box = storeBox(kind);
    const job = box.job('stopped');
    const log = box.path('log');
    const loop = start(['-n', job, '--every', '100ms', '--for', '1h', '--', fixture('hold.sh'), log, box.path('never')], box.env);
    await waitFor(() => lines(log).length === 1, 'the first run to start');
    loop.child.kill('SIGTERM');
    const result = await loop.done;
    expect(result.code).toBe(143);
    expect(result.stderr).toMatch(new RegExp(`^cronguard: ${job}: killed by SIGTERM \\(forwarded by cronguard\\) after \\S+ \\(run \\d+; cronguard logs \\d+\\)\\n$`));
  });

  it('--on-request --for serves each request as it comes, and nothing else', async () => {
    const box = storeBox(kind);
    const job = box.job('serve');
    const log = box.path('log');
    await cronguard(['migrate'], box.env);
    const loop = start(['-v', '-n', job, '--on-request', '--for', '1h', '--', fixture('args.sh'), log], box.env);
    let said = '';
    loop.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => said.includes('holding'), 'the loop to hold the lock');
    for (const target of ['one', 'two', 'three']) {
      await box.request(job, [target]);
      await waitFor(() => lines(log).some((l) => l.endsWith(` ${target}`)), `the request for ${target} to be served`);
    }
    loop.child.kill('SIGTERM');
    const result = await loop.done;
    expect(result.code).toBe(143);
    expect(result.stderr).toMatch(/stopped by SIGTERM while waiting for the next run\n$/);
    expect((await box.requests()).map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect((await box.runs()).map((r) => r.trigger)).toEqual(['request', 'request', 'request']);
  });

  it('request --wait exits with the exit code of the run that served it; --timeout gives up with 124', async () => {
    const box = storeBox(kind);
    const job = box.job('waited');
    await cronguard(['migrate'], box.env);
    const loop = start(['-n', job, '--on-request', '--for', '1h', '--', 'sh', '-c', 'exit 7'], box.env);
    const waited = await cronguard(['request', '--wait', job], box.env);
    loop.child.kill('SIGTERM');
    await loop.done;
    expect(waited.code).toBe(7);
    expect(waited.stdout).toMatch(/^\d+\n$/);
    expect(waited.stderr).toMatch(/request \d+ failed by run \d+ \(cronguard logs \d+\), exit 7/);
    const nobody = await cronguard(['request', '--wait', '--timeout', '300ms', job], box.env);
    expect(nobody.code).toBe(124);
    expect(nobody.stderr).toMatch(/is still pending after 300ms; stopped waiting/);
  });

  it('request --wait answers as the served run exited (timed out 124, signalled 128+N), waits all of --timeout, and says so when the request vanishes', async () => {
    const box = storeBox(kind);
    await cronguard(['migrate'], box.env);
    const slow = box.job('slow');
    const signalled = box.job('signalled');
    const loops = [
      start(['-n', slow, '--on-request', '--for', '1h', '-t', '200ms', '--', 'sleep', '30'], box.env),
      start(['-n', signalled, '--on-request', '--for', '1h', '--', 'sh', '-c', 'kill -TERM $$'], box.env),
    ];
    const timedOut = await cronguard(['request', '--wait', slow], box.env);
    expect(timedOut.code).toBe(124);
    expect(timedOut.stderr).toMatch(/^cronguard: request \d+ failed by run \d+ \(cronguard logs \d+\), timed_out, exit 124\n$/);
    const killed = await cronguard(['request', '--wait', signalled], box.env);
    expect(killed.code).toBe(143);
    for (const loop of loops) loop.child.kill('SIGTERM');
    await Promise.all(loops.map((loop) => loop.done));

    const before = Date.now();
    expect((await cronguard(['request', '--wait', '--timeout', '1500ms', box.job('nobody')], box.env)).code).toBe(124);
    expect(Date.now() - before).toBeGreaterThanOrEqual(1500);

    const waiting = start(['request', '--wait', box.job('vanishing')], box.env);
    let id = '';
    waiting.child.stdout?.on('data', (chunk: Buffer) => (id += chunk.toString()));
    await waitFor(() => id.endsWith('\n'), 'the request id');
    await box.forgetRequest(Number(id));
    const vanished = await waiting.done;
    expect(vanished.code).toBe(1);
    expect(vanished.stderr).toBe(`cronguard request: request ${id.trim()} is gone from the run log (pruned, or deleted) before it was seen to end\n`);
  });

  it('a paused job stops its loop', async () => {
    const box = storeBox(kind);
    const job = box.job('paused-loop');
    await cronguard(['migrate'], box.env);
    const loop = start(['-n', job, '--on-request', '--for', '1h', '--', 'true'], box.env);
    await waitFor(async () => (await cronguard(['locks', '--json'], box.env)).stdout.includes(job), 'the loop to hold its lock');
    await cronguard(['disable', job], box.env);
    await box.request(job);
    const result = await loop.done;
    expect(result.code).toBe(0);
    expect(await box.runs()).toEqual([]);
    expect(existsSync(box.path('never'))).toBe(false);
  });
});

describe.each(STORES)('--jitter (%s)', (kind) => {
  it('waits a random time below the bound before taking the lock', async () => {
    const box = storeBox(kind);
    for (let i = 0; i < 4; i++) expect((await cronguard(['-n', box.job('j'), '--jitter', '400ms', '--', 'true'], box.env)).code).toBe(0);
    const waits = (await box.runs()).map((r) => Date.parse(String(r.started_at)) - Date.parse(String(r.invoked_at)));
    expect(waits.some((w) => w > 0)).toBe(true);
    // The lock itself may take a moment on a busy machine; the jitter never exceeds its bound.
    for (const w of waits) expect(w).toBeLessThan(400 + 2000);
  });
});
