import { describe, expect, it } from 'vitest';
import { holdLease, type LeaseLine, watchdogLimitMs } from '../../src/lock/lease.js';
import { messages } from '../../src/util/io.js';
import { monotonicMs } from '../../src/util/time.js';

// The watchdog of a lease (see Watchdog) counts from each beat, the renewal's reply; the
// lease expires counting from the renewal's start. A beat may come only while the watchdog's
// limit from it still ends before that expiry, or a stopped cronguard's command would
// outlive its lease. A real holder (holdLease) over a line whose replies come late.
function line(delayMs: () => number): LeaseLine {
  return {
    renew: (_key, _epoch, _ttl, timeoutMs) =>
      new Promise((resolve, reject) => {
        const delay = delayMs();
        if (delay > timeoutMs) setTimeout(() => reject(new Error('no answer')), timeoutMs);
        else setTimeout(() => resolve(true), delay);
      }),
    release: async () => {},
    close: async () => {},
  };
}

async function beatsWith(ttlMs: number, delays: number[], waitMs: number): Promise<number> {
  const held = holdLease({ key: 1n, epoch: 1n, ttlMs, sentAt: monotonicMs() }, line(() => delays.shift() ?? 0), {}, messages(false));
  let beats = 0;
  held.heartbeat?.onBeat(() => beats++);
  await new Promise((r) => setTimeout(r, waitMs));
  await held.release();
  return beats;
}

// How many renewals a holder sends in waitMs when every reply takes lateMs.
async function renewalsWith(ttlMs: number, lateMs: number, waitMs: number): Promise<number> {
  let sent = 0;
  const held = holdLease({ key: 1n, epoch: 1n, ttlMs, sentAt: monotonicMs() }, line(() => {
    sent++;
    return lateMs;
  }), {}, messages(false));
  await new Promise((r) => setTimeout(r, waitMs));
  await held.release();
  return sent;
}

describe('a lease holder beats its watchdog', () => {
  it('after renewals answered at once (one, before the second is due)', async () => {
    expect(await beatsWith(9000, [], 5000)).toBe(1);
  });

  it('not after a renewal answered too late for the watchdog to act before the lease expires', async () => {
    const ttlMs = 9000;
    // Answered within the renewal's time (1.2 s here), but later than ttl - (limit + 2 s)
    // after it was sent (1 s here).
    const late = ttlMs - watchdogLimitMs(ttlMs) - 2000 + 100;
    expect(await beatsWith(ttlMs, [late, late, late], ttlMs / 3 + late + 200)).toBe(0);
  });

  it('renewing again soon after such a reply (a fifteenth of the ttl), and beating when that one is answered in time', async () => {
    const ttlMs = 9000;
    const late = ttlMs - watchdogLimitMs(ttlMs) - 2000 + 100;
    // Before the renewal that was due next (a third of the ttl after the late one).
    expect(await beatsWith(ttlMs, [late], ttlMs / 3 + late + 1400)).toBe(1);
  });

  it('pauses between renewals whose replies all come too late (an overloaded machine or pooler), never renewing without a break', async () => {
    const ttlMs = 9000;
    const late = ttlMs - watchdogLimitMs(ttlMs) - 2000 + 100;
    // The first at a third of the ttl; then each a reply plus a fifteenth of the ttl apart.
    const count = await renewalsWith(ttlMs, late, ttlMs / 3 + 4 * (late + ttlMs / 15) - 100);
    expect(count).toBeGreaterThanOrEqual(3);
    expect(count).toBeLessThanOrEqual(4);
  });
});
