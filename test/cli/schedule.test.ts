import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { parseAt } from '../../src/util/time.js';
import { cronguard, runs, sandbox } from '../helpers.js';

describe('scheduling options that mean nothing: one line, 64, nothing run or recorded', () => {
  it.each([
    ['--every without --for', ['--every', '10s'], /--every needs --for/],
    ['--every longer than --for', ['--every', '1m', '--for', '30s'], /--every is longer than --for/],
    ['--every of no time', ['--every', '0', '--for', '30s'], /--every: the period must be longer than 0/],
    ['--on-request with --every but no --for', ['--on-request', '--every', '10s'], /--every needs --for/],
    ['--for alone', ['--for', '55s'], /--for applies to --every, --on-request or --scheduled/],
    ['--retries -1', ['--retries', '-1'], /--retries: '-1' is not a whole number from 0 to 100/],
    ['--retries 1000', ['--retries', '1000'], /from 0 to 100/],
    ['--retry-delay without --retries', ['--retry-delay', '5s'], /--retry-delay applies with --retries/],
    ['--retry-on-timeout without --retries', ['--retry-on-timeout'], /--retry-on-timeout applies with --retries/],
    ['--batch-max without --batch', ['--batch-max', '5'], /--batch-max applies with --batch/],
    ['--batch-max 0', ['--batch', '--batch-max', '0'], /--batch-max: '0' is not a whole number from 1/],
    ['a bad --min-interval', ['--min-interval', 'hourly'], /--min-interval: invalid duration 'hourly'/],
    ['a bad --jitter', ['--jitter', '-5s'], /--jitter: invalid duration/],
  ])('%s', async (_what, options, message) => {
    const box = sandbox();
    const result = await cronguard([...options, '-n', 'x', '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(existsSync(box.path('ran'))).toBe(false);
    expect(runs(box.stateDir)).toEqual([]);
  });
});

describe('request: bad input', () => {
  it.each([
    ['no job', ['request'], /^cronguard request: which job\? cronguard request NAME/],
    ['an empty name', ['request', ''], /job name is empty/],
    ['an invalid name', ['request', '../x'], /invalid job name/],
    ['an all-digit name', ['request', '42'], /all digits/],
    ['an unreadable time', ['request', 'j', '--at', 'soonish'], /--at: 'soonish' is not a time/],
    ['a time in the past', ['request', 'j', '--at', '2001-01-01 00:00'], /--at: 2001-01-01 00:00 is in the past; --at now runs it at once/],
    ['--timeout without --wait', ['request', 'j', '--timeout', '5s'], /--timeout applies with --wait/],
    ['a bad --cancel id', ['request', '--cancel', 'abc'], /--cancel: 'abc' is not a request id/],
    ['--cancel with a job', ['request', 'j', '--cancel', '5'], /--cancel takes a request id and nothing else/],
  ])('%s: 64, nothing recorded', async (_what, args, message) => {
    const box = sandbox();
    const result = await cronguard(args, box.env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(existsSync(`${box.stateDir}/cronguard.db`)).toBe(false);
  });

  it('cancelling a request that is not there is "not found" (1); one no longer pending is 64', async () => {
    const box = sandbox();
    const id = (await cronguard(['request', 'j'], box.env)).stdout.trim();
    expect(await cronguard(['request', '--cancel', '999'], box.env)).toMatchObject({ code: 1, stderr: 'cronguard request: no request with id 999\n' });
    expect(await cronguard(['request', '--cancel', id], box.env)).toMatchObject({ code: 0, stderr: `cronguard: request ${id} cancelled\n` });
    const again = await cronguard(['request', '--cancel', id], box.env);
    expect(again).toMatchObject({ code: 64 });
    expect(again.stderr).toMatch(/is cancelled; only a pending request can be cancelled/);
  });
});

describe('--at', () => {
  const now = new Date(2026, 5, 15, 12, 30, 0);
  it.each([
    ['now', now],
    ['+10m', new Date(now.getTime() + 600_000)],
    ['in 2h', new Date(now.getTime() + 7_200_000)],
    ['13:00', new Date(2026, 5, 15, 13, 0, 0)],
    ['03:00', new Date(2026, 5, 16, 3, 0, 0)],
    ['tomorrow 12:00', new Date(2026, 5, 16, 12, 0, 0)],
    ['2026-07-01 03:00', new Date(2026, 6, 1, 3, 0, 0)],
    ['2026-07-01T03:00:00Z', new Date(Date.UTC(2026, 6, 1, 3, 0, 0))],
    ['2026-07-01T03:00+02:00', new Date(Date.UTC(2026, 6, 1, 1, 0, 0))],
  ])('%s', (text, expected) => {
    expect(parseAt(text, now)).toEqual(expected);
  });

  it.each(['yesterday', '25:00', '12:61', '2026-02-31 03:00', '2026-07-01', '+5x', ''])('refuses %j', (text) => {
    expect(() => parseAt(text, now)).toThrow(UsageError);
  });
});
