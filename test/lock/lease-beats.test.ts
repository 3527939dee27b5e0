import { describe, expect, it } from 'vitest';
import { holdLease, type LeaseLine, watchdogLimitMs } from '../../src/lock/lease.js';
import { messages } from '../../src/util/io.js';
import { monotonicMs } from '../../src/util/time.js';

// The watchdog of a lease (see Watchdog) is fed after every renewal that holds the lease,
// however late its reply, and counts from the renewal's start (the beat carries its age:
// heartbeat.sinceMs), as the lease's expiry does. A real holder (holdLease) over a line whose
// replies come late.
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

// The age each beat reports (the time since the renewal it tells of was sent), in waitMs.
async function beatsWith(ttlMs: number, delays: number[], waitMs: number): Promise<number[]> {
  const held = holdLease({ key: 1n, epoch: 1n, ttlMs, sentAt: monotonicMs() }, line(() => delays.shift() ?? 0), {}, messages(false));
  const ages: number[] = [];
  held.heartbeat?.onBeat(() => ages.push(held.heartbeat?.sinceMs() ?? -1));
  await new Promise((r) => setTimeout(r, waitMs));
  await held.release();
  return ages;
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
    expect(await beatsWith(9000, [], 5000)).toHaveLength(1);
  });

  it('after a renewal answered late but in time too, telling how long ago that renewal was sent', async () => {
    const ttlMs = 9000;
    // Later than ttl - (limit + 2 s) after it was sent: such a reply fed no beat before, and
    // the watchdog SIGKILLed the command of a lease that was valid.
    const late = ttlMs - watchdogLimitMs(ttlMs) - 2000 + 100;
    const ages = await beatsWith(ttlMs, [late], ttlMs / 3 + late + 500);
    expect(ages).toHaveLength(1);
    // Node's timers count whole milliseconds of its loop clock, so a reply set `late` ms
    // away may come up to 1 ms early by performance.now().
    expect(ages[0]).toBeGreaterThanOrEqual(late - 1);
  });

  it('renews at least a second apart however late the replies come (an overloaded machine or pooler)', async () => {
    const ttlMs = 9000;
    const waitMs = (ttlMs / 3) * 3.5;
    const count = await renewalsWith(ttlMs, 1500, waitMs);
    expect(count).toBeGreaterThanOrEqual(1);
    expect(count).toBeLessThanOrEqual(Math.floor((waitMs - ttlMs / 3) / 1000) + 1);
  });
});
