import { describe, expect, it } from 'vitest';
import { cronguard, start, waitFor } from '../helpers.js';
import { type StoreKind, storeBox } from '../stores.js';

// A loop (--for) holds its lock for its whole window: between runs an application's own try
// of the lock reads "busy", while `locks` said "no locks held" and `status` "idle" (issue 36,
// item 9). Both say now who holds it, and until when.
interface Shown {
  job: string;
  state: string;
  holding: { host: string; pid: number; until: string; lock: string } | null;
}

const CASES: [StoreKind, string[], string][] = [
  ['sqlite', [], 'flock'],
  ['sqlite', ['--lock-file', 'LOCKFILE'], 'flock'],
  ['postgres', [], 'postgres'],
  ['postgres', ['-l', 'lease'], 'lease'],
  ['mysql', [], 'mysql'],
];

describe.each(CASES)('a loop holding its lock between runs (%s %j)', (kind, extra, lock) => {
  it('status and locks show it: host, pid, idle holding until its window ends', async () => {
    const box = storeBox(kind);
    const job = box.job('between');
    const args = extra.map((a) => (a === 'LOCKFILE' ? box.path('shop.lock') : a));
    const loop = start(['-n', job, ...args, '--on-request', '--for', '1h', '--', 'true'], box.env);
    const status = async () => (JSON.parse((await cronguard(['status', '--json'], box.env)).stdout || '[]') as Shown[]).find((j) => j.job === job);
    try {
      await waitFor(async () => (await status())?.holding != null, 'the loop to say it holds the lock');
      const shown = (await status()) as Shown;
      expect(shown).toMatchObject({ state: 'idle', holding: { pid: loop.child.pid, lock } });
      expect(Date.parse(shown.holding?.until as string)).toBeGreaterThan(Date.now() + 3000 * 1000);
      expect((await cronguard(['status', job], box.env)).stdout).toMatch(/state +idle, holding until \d\d:\d\d:\d\d/);
      const listed = await cronguard(['locks', '--json'], box.env);
      const held = (JSON.parse(listed.stdout) as { job: string; pid: number | null; holding_until?: string; verified: boolean }[]).filter((h) => h.job === job);
      expect(held).toEqual([expect.objectContaining({ pid: loop.child.pid, verified: true })]);
      if (lock !== 'lease') {
        expect(held[0]?.holding_until).toBe(shown.holding?.until);
        expect((await cronguard(['locks'], box.env)).stdout).toMatch(/idle, holding until \d\d:\d\d:\d\d/);
      }
    } finally {
      loop.child.kill('SIGTERM');
      await loop.done;
    }
    // Let go: said so.
    expect((await status())?.holding).toBeNull();
  });
});
