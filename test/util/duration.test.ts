import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { formatDuration, parseDuration } from '../../src/util/duration.js';

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['10s', 10_000],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['1h30m', 5_400_000],
    ['1m30s500ms', 90_500],
    ['45', 45_000],
    ['0.5', 500],
    ['1.5s', 1500],
    ['0', 0],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text, '-t')).toBe(ms);
  });

  it.each(['5x', '-1', '', 's', '10 s', '1h 30m', 'ms', '1.2.3', '5m-1s', '1e3'])('rejects %j', (text) => {
    expect(() => parseDuration(text, '--timeout')).toThrow(UsageError);
    expect(() => parseDuration(text, '--timeout')).toThrow(/--timeout: invalid duration/);
  });
});

describe('formatDuration', () => {
  it.each([
    [850, '850ms'],
    [1234, '1.23s'],
    [12_345, '12.3s'],
    [245_000, '4m05s'],
    [7_800_000, '2h10m'],
    [90_000_000, '1d01h'],
  ])('%d ms reads %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});
