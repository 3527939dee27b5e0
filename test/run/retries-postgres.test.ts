import { describe, expect, it } from 'vitest';
import { BINARY, cronguard, fixture, lines, start, waitFor } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

describe.each(STORES)('--retries (%s)', (kind) => {
  it('a job paused after a failed attempt is not tried again: one line says so, the exit is that attempt\'s', async () => {
    const box = storeBox(kind);
    const job = box.job('paused');
    const log = box.path('attempts');
    // The attempt itself pauses its job, as an operator would while it runs.
    const pause = `echo attempt >> ${log}; ${process.execPath} ${BINARY} disable ${job} --reason maintenance; exit 3`;
    const result = await cronguard(['-n', job, '--retries', '3', '--retry-delay', '100ms', '--', 'sh', '-c', pause], box.env);
    expect(result.code).toBe(3);
    // Its own lines; disable's confirmation is the command's output.
    const said = result.stderr.trim().split('\n').filter((line) => line.startsWith(`cronguard: ${job}: `));
    expect(said).toHaveLength(2);
    expect(said[0]).toMatch(/failed with exit 3 after .*; retrying in 100ms \(attempt 2 of 4\)$/);
    expect(said[1]).toMatch(new RegExp(`^cronguard: ${job}: not retrying: paused since \\S+ by \\S+: maintenance \\(cronguard enable ${job} resumes it\\)$`));
    expect(lines(log)).toEqual(['attempt']);
    expect((await box.runs()).map((r) => [r.attempt, r.status])).toEqual([[1, 'failed']]);
  });

  it('runs a failed attempt again after a doubling delay, each attempt its own row; the request follows', async () => {
    const box = storeBox(kind);
    const job = box.job('flaky');
    const log = box.path('attempts');
    await cronguard(['migrate'], box.env);
    const id = await box.request(job);
    const result = await cronguard(['-n', job, '--retries', '3', '--retry-delay', '200ms', '--', fixture('flaky.sh'), log, '2', '5'], box.env);
    expect(result.code).toBe(0);
    const [first, second, third] = result.stderr.trim().split('\n');
    expect(first).toMatch(new RegExp(`^cronguard: ${job}: failed with exit 5 after \\S+ \\(run 1; cronguard logs 1\\); retrying in 200ms \\(attempt 2 of 4\\)$`));
    expect(second).toMatch(/retrying in 400ms \(attempt 3 of 4\)$/);
    expect(third).toBeUndefined();
    const runs = await box.runs();
    expect(runs.map((r) => [r.attempt, r.trigger, r.status, r.exit_code])).toEqual([
      [1, 'request', 'failed', 5],
      [2, 'retry', 'failed', 5],
      [3, 'retry', 'succeeded', 0],
    ]);
    // Each delay at least as long as it says (D, then 2D), from the end of one attempt.
    const gap = (a: number, b: number) => Date.parse(String(runs[b]?.started_at)) - Date.parse(String(runs[a]?.finished_at));
    expect(gap(0, 1)).toBeGreaterThanOrEqual(200);
    expect(gap(1, 2)).toBeGreaterThanOrEqual(400);
    expect(await box.requests()).toEqual([expect.objectContaining({ id, status: 'succeeded', attempts: 3, run_id: runs[2]?.id })]);
  });

  it('exits with the last attempt\'s code, and fails the request only after the last attempt', async () => {
    const box = storeBox(kind);
    const job = box.job('hopeless');
    await cronguard(['migrate'], box.env);
    await box.request(job);
    const result = await cronguard(['-n', job, '--retries', '2', '--retry-delay', '10ms', '--', fixture('flaky.sh'), box.path('a'), '99', '4'], box.env);
    expect(result.code).toBe(4);
    expect((await box.runs()).map((r) => r.status)).toEqual(['failed', 'failed', 'failed']);
    expect(await box.requests()).toEqual([expect.objectContaining({ status: 'failed', attempts: 3, exit_code: 4 })]);
  });

  it('does not retry a timeout unless --retry-on-timeout says so', async () => {
    const box = storeBox(kind);
    const plain = await cronguard(['-n', box.job('slow'), '--retries', '2', '--retry-delay', '10ms', '-t', '300ms', '--', 'sleep', '30'], box.env);
    expect(plain.code).toBe(124);
    expect((await box.runs()).map((r) => r.status)).toEqual(['timed_out']);
    const again = await cronguard(['-n', box.job('slow2'), '--retries', '1', '--retry-delay', '10ms', '--retry-on-timeout', '-t', '300ms', '--', 'sleep', '30'], box.env);
    expect(again.code).toBe(124);
    expect((await box.runs()).filter((r) => r.job === box.job('slow2')).map((r) => r.status)).toEqual(['timed_out', 'timed_out']);
  });

  it('SIGTERM during a delay stops retrying: exit 143, one line, the request failed', async () => {
    const box = storeBox(kind);
    const job = box.job('stopped');
    const log = box.path('attempts');
    await cronguard(['migrate'], box.env);
    await box.request(job);
    const run = start(['-n', job, '--retries', '5', '--retry-delay', '1h', '--', fixture('flaky.sh'), log, '99', '3'], box.env);
    let said = '';
    run.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => said.includes('retrying in 1h00m'), 'the first attempt to fail');
    run.child.kill('SIGTERM');
    const result = await run.done;
    expect(result.code).toBe(143);
    expect(result.stderr).toMatch(new RegExp(`\\ncronguard: ${job}: stopped by SIGTERM while waiting to retry\\n$`));
    expect(lines(log)).toHaveLength(1);
    expect((await box.runs()).map((r) => r.status)).toEqual(['failed']);
    expect(await box.requests()).toEqual([expect.objectContaining({ status: 'failed', attempts: 1 })]);
  });
});
