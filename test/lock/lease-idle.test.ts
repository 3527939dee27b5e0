import { describe, expect, it } from 'vitest';
import { holdLease, type LeaseLine, lossMs } from '../../src/lock/lease.js';
import { messages } from '../../src/util/io.js';
import { monotonicMs } from '../../src/util/time.js';

// A holder whose timers fire late (cronguard starved or stopped, here its thread blocked)
// counts its lease lost while a command runs under it, as fencing requires. With nothing
// running (a retry's delay, a loop's wait for its next run), it asks its database first: a
// lease still its own, unexpired, holds on. A real holder over a line that answers at once.
const TTL_MS = 5000;

function line(answerMs = 0): LeaseLine & { renewals: number } {
  const counted = {
    renewals: 0,
    renew: async () => {
      counted.renewals++;
      await new Promise((r) => setTimeout(r, answerMs));
      return true;
    },
    release: async () => {},
    close: async () => {},
  };
  return counted;
}

// Blocks this thread as a stopped process is: no timer fires meanwhile.
const stall = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
const turn = () => new Promise((r) => setTimeout(r, 50));
const LOST = /^lease of 1 \(epoch 1\): not renewed for [\d.]+s of its 5s$/;

// A holder of a lease just taken over `database`, and the reasons it was told it lost it.
function holder(database: LeaseLine) {
  const held = holdLease({ key: 1n, epoch: 1n, ttlMs: TTL_MS, sentAt: monotonicMs() }, database, {}, messages(false));
  const lost: string[] = [];
  held.onLost((reason) => lost.push(reason));
  return { held, lost };
}

// Stalled past the loss time with no command running: the holder asks its database.
async function stalledIdle(database: LeaseLine & { renewals: number }): Promise<void> {
  stall(lossMs(TTL_MS) + 500);
  while (database.renewals === 0) await turn();
}

describe('a lease whose timers fired late', () => {
  it('with no command running, asks its database and, still its own, holds on', async () => {
    const database = line();
    const { held, lost } = holder(database);
    await stalledIdle(database);
    await held.verify('start');
    expect(lost).toEqual([]);
    await held.verify('end');
    expect(lost).toEqual([]);
    await held.release();
  });

  it('with a command running, counts itself lost without asking', async () => {
    const database = line();
    const { held, lost } = holder(database);
    await held.verify('start');
    stall(lossMs(TTL_MS) + 500);
    while (lost.length === 0) await turn();
    expect(lost).toEqual([expect.stringMatching(LOST)]);
    expect(database.renewals).toBe(0);
    await held.release();
  });

  it('asked, and told it is still its own too late to start a command in time, starts none: it is lost', async () => {
    // Answered within the question's time (5 s), but later than the loss time (2.5 s at a
    // 5 s ttl) after the question was sent: the lease may expire before a command could be
    // stopped.
    const database = line(lossMs(TTL_MS) + 500);
    const { held, lost } = holder(database);
    await stalledIdle(database);
    await held.verify('start');
    expect(lost).toEqual([expect.stringMatching(LOST)]);
    await held.release();
  });
});
