import { appendFileSync, readFileSync } from 'node:fs';
import { expect } from 'vitest';
import { isAlive, lines, waitFor } from './helpers.js';

// What slot.sh noted of one run: when it started and ended (its own clock, ns), in which
// slot (--max-running), its pid and fencing token.
export interface SlotRun {
  readonly slot: number;
  readonly pid: number;
  readonly token: string;
  readonly start: bigint;
  readonly end: bigint | null;
}

export function slotRuns(file: string): SlotRun[] {
  const marks = lines(file).map((l) => l.split(' '));
  const ends = new Map(marks.filter((m) => m[0] === 'end').map((m) => [m[3], BigInt(m[1] as string)]));
  return marks
    .filter((m) => m[0] === 'start')
    .map((m) => ({ slot: Number(m[2]), pid: Number(m[3]), token: m[4] as string, start: BigInt(m[1] as string), end: ends.get(m[3]) ?? null }));
}

// Walks the runs' starts and ends in time order and checks that at every instant at most
// `n` ran, each in a slot 0 to n-1 that no other run held then. Returns the most that ran at
// once.
export function distinctSlots(file: string, n: number): number {
  const events = slotRuns(file)
    .flatMap((r) => [
      { at: r.start, slot: r.slot, starts: true },
      ...(r.end === null ? [] : [{ at: r.end, slot: r.slot, starts: false }]),
    ])
    .sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : Number(a.starts) - Number(b.starts)));
  const held = new Set<number>();
  let most = 0;
  for (const { slot, starts, at } of events) {
    if (starts) {
      expect(slot, `slot at ${at}`).toBeGreaterThanOrEqual(0);
      expect(slot, `slot at ${at}`).toBeLessThan(n);
      expect(held.has(slot), `slot ${slot} started at ${at} while held`).toBe(false);
      held.add(slot);
      most = Math.max(most, held.size);
    } else {
      held.delete(slot);
    }
  }
  return most;
}

// The end of a run whose command the test killed (SIGKILL, which slot.sh cannot note), noted
// once the command is seen gone; the test starts what may take its slot only after this.
export async function notedGone(file: string, run: SlotRun): Promise<void> {
  await waitFor(() => !isAlive(run.pid), `the killed command ${run.pid} to be gone`);
  appendFileSync(file, `end ${BigInt(Date.now()) * 1_000_000n} ${run.slot} ${run.pid}\n`);
}

// The wrapper of a command: its parent.
export function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}
