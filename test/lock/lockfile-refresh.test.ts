import * as fs from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { sandbox } from '../helpers.js';

// A lockfile lease's refresh reads the epochs, then touches its own. A holder stopped
// between the two (SIGSTOP, a frozen VM) must not count the touch as a refresh when it
// wakes: a waiter may have taken the lease over meanwhile. The stop is made here, between
// the two, by the monotonic clock jumping when the touch begins; the files are real.
const clock = vi.hoisted(() => ({ now: 1_000_000, onTouch: null as (() => void) | null }));

vi.mock('../../src/util/time.js', async (original) => ({
  ...(await original<typeof import('../../src/util/time.js')>()),
  monotonicMs: () => clock.now,
}));

vi.mock('node:fs', async (original) => {
  const real = await original<typeof import('node:fs')>();
  return {
    ...real,
    lutimesSync: (...args: Parameters<typeof real.lutimesSync>) => {
      const touch = clock.onTouch;
      clock.onTouch = null;
      touch?.();
      return real.lutimesSync(...args);
    },
  };
});

const { lockfileBackend } = await import('../../src/lock/lockfile.js');

afterEach(() => {
  clock.onTouch = null;
});

async function held() {
  const box = sandbox();
  fs.mkdirSync(box.lockDir, { recursive: true });
  const lock = await lockfileBackend(box.lockDir, 'job', { gid: null, managed: false }).acquire({ waitMs: 0, abort: new AbortController().signal });
  if (!lock?.heartbeat) throw new Error('the lease was not taken');
  const lost: string[] = [];
  lock.onLost((reason) => lost.push(reason));
  let beats = 0;
  lock.heartbeat.onBeat(() => beats++);
  return { lock, heartbeat: lock.heartbeat, lost, beats: () => beats };
}

describe('lockfile lease refresh', () => {
  it('proves the lease as of its reading of the epochs when nothing stopped it', async () => {
    const { lock, heartbeat, lost, beats } = await held();
    clock.now += 900;
    lock.verify('start');
    expect(lost).toEqual([]);
    expect(beats()).toBe(1);
    expect(heartbeat.sinceMs()).toBe(0);
    await lock.release();
  });

  it('counts the lease lapsed when cronguard was stopped between reading the epochs and the touch', async () => {
    const { lock, lost, beats } = await held();
    clock.now += 900;
    // Stopped for 4.5 s right after the epochs were read: 5.4 s since the last refresh.
    clock.onTouch = () => {
      clock.now += 4_500;
    };
    lock.verify('start');
    expect(lost).toEqual([expect.stringMatching(/^lockfile \S+job\.lockdir: the lease lapsed, not refreshed for 5\.4s \(cronguard was stopped or stalled\)$/)]);
    expect(beats()).toBe(0);
    // Lost for good: a later refresh neither beats nor says it again.
    lock.verify('start');
    expect(lost).toHaveLength(1);
    expect(beats()).toBe(0);
    await lock.release();
  });

  it('still refreshes after a pause there that stays within the lapse', async () => {
    const { lock, heartbeat, lost, beats } = await held();
    clock.now += 900;
    clock.onTouch = () => {
      clock.now += 3_000;
    };
    lock.verify('start');
    expect(lost).toEqual([]);
    expect(beats()).toBe(1);
    // Proven as of the reading, not of the touch: the 3 s after it already count.
    expect(heartbeat.sinceMs()).toBe(3_000);
    await lock.release();
  });
});
