import { afterEach, describe, expect, it } from 'vitest';
import { localTime } from '../../src/util/time.js';

describe('localTime', () => {
  const zone = process.env.TZ;
  afterEach(() => {
    if (zone === undefined) delete process.env.TZ;
    else process.env.TZ = zone;
  });

  it.each([
    ['UTC', '2026-01-01 00:00:00 +00:00'],
    ['Asia/Kathmandu', '2026-01-01 05:45:00 +05:45'],
    ['America/New_York', '2025-12-31 19:00:00 -05:00'],
    ['America/St_Johns', '2025-12-31 20:30:00 -03:30'],
  ])('shows a moment in TZ=%s as %s', (tz, shown) => {
    process.env.TZ = tz;
    expect(localTime('2026-01-01T00:00:00.000Z')).toBe(shown);
  });

  it('follows daylight saving time', () => {
    process.env.TZ = 'Europe/Berlin';
    expect(localTime('2026-07-01T12:00:00Z')).toBe('2026-07-01 14:00:00 +02:00');
  });
});
