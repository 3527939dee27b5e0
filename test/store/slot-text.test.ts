import { describe, expect, it } from 'vitest';
import { type JobSlots, slotsText } from '../../src/store/slot-holders.js';

const holder = (slot: number, host: string) => ({ slot, host, pid: 100 + slot, run_id: slot + 1, since: '2026-12-06T05:00:00.000Z' });

describe('how many copies of a job run, in words', () => {
  it('counts the fleet against N when the slots are the fleet\'s (a database or Redis lock)', () => {
    const slots: JobSlots = { max_running: 3, per_host: false, running: [holder(0, 'web1'), holder(1, 'web2')] };
    expect(slotsText(slots)).toBe('2 of 3 running');
  });

  it('counts each host against N when the slots are lock files, each host\'s own', () => {
    const slots: JobSlots = { max_running: 3, per_host: true, running: [holder(0, 'web2'), holder(0, 'web1'), holder(1, 'web1'), holder(1, 'web2')] };
    expect(slotsText(slots)).toBe('4 running: 2 of 3 on web1, 2 of 3 on web2');
  });

  it('says N of M on one host, lock files or not', () => {
    expect(slotsText({ max_running: 3, per_host: true, running: [holder(0, 'web1'), holder(2, 'web1')] })).toBe('2 of 3 running');
  });
});
