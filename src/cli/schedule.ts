import { UsageError } from '../errors.js';
import { parseDuration } from '../util/duration.js';
import type { ParsedRun } from './options.js';

// When and how often a job runs: the minimum interval, the stored schedule, requests,
// retries, repetition and jitter; and the combinations of them that mean nothing (64).
export function scheduling(str: (key: string) => string | undefined, options: ParsedRun['options']) {
  const duration = (key: string, option: string) => (str(key) === undefined ? null : parseDuration(str(key) as string, option));
  const everyMs = duration('every', '--every');
  const forMs = duration('for', '--for');
  const onRequest = options.onRequest === true;
  const scheduled = options.scheduled === true;
  const batch = options.batch === true;
  const retries = str('retries') === undefined ? 0 : count(str('retries') as string, '--retries', 0, 100);
  if (everyMs !== null && forMs === null) throw new UsageError('--every needs --for: how long to keep repeating (e.g. --every 10s --for 1m)');
  if (everyMs !== null && everyMs === 0) throw new UsageError('--every: the period must be longer than 0');
  if (everyMs !== null && forMs !== null && everyMs > forMs) throw new UsageError('--every is longer than --for: it would never repeat');
  if (forMs !== null && everyMs === null && !onRequest && !scheduled) throw new UsageError('--for applies to --every, --on-request or --scheduled');
  if (scheduled && str('minInterval') !== undefined) throw new UsageError('--scheduled spaces runs by the stored schedule; it cannot go with --min-interval (use "cronguard schedule NAME --every D")');
  if (scheduled && onRequest) throw new UsageError('--scheduled runs requests too; it cannot go with --on-request');
  if (scheduled && options.noLog) throw new UsageError('--scheduled reads the schedule from the run log; it cannot go with --no-log');
  if (str('batchMax') !== undefined && !batch) throw new UsageError('--batch-max applies with --batch');
  if (str('retryDelay') !== undefined && retries === 0) throw new UsageError('--retry-delay applies with --retries');
  if (options.retryOnTimeout && retries === 0) throw new UsageError('--retry-on-timeout applies with --retries');
  return {
    minIntervalMs: duration('minInterval', '--min-interval'),
    onRequest,
    scheduled,
    batch,
    batchMax: str('batchMax') === undefined ? null : count(str('batchMax') as string, '--batch-max', 1, 1_000_000),
    retries,
    retryDelayMs: duration('retryDelay', '--retry-delay') ?? 10_000,
    retryOnTimeout: options.retryOnTimeout === true,
    everyMs,
    forMs,
    jitterMs: duration('jitter', '--jitter') ?? 0,
  };
}

function count(text: string, option: string, min: number, max: number): number {
  if (!/^\d{1,7}$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new UsageError(`${option}: '${text}' is not a whole number from ${min} to ${max}`);
  }
  return Number(text);
}
