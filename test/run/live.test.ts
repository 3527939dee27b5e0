import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LiveCopy } from '../../src/run/supervisor/live.js';
import { liveDir, liveName, sweepStale } from '../../src/run/supervisor/live-file.js';
import { LiveReader } from '../../src/run/supervisor/live-reader.js';
import { newRunKey, processStart } from '../../src/util/process-id.js';
import { sandbox } from '../helpers.js';

// The wrapper's side and the follower's side of the live copy, in one process: the order
// of writes and reads is the test's, so each step is deterministic.
function pair(stateDir: string, cap?: number) {
  const notes: string[] = [];
  const key = newRunKey();
  const copy = new LiveCopy(stateDir, key, 'j', { warn: (l) => notes.push(l), verbose: (l) => notes.push(l) }, cap);
  const reader = new LiveReader(liveDir(stateDir), liveName(key) as string);
  let read = '';
  const pump = () =>
    reader.pump(async (chunk) => {
      read += chunk.toString();
      return true;
    });
  return { copy, reader, pump, notes, key, read: () => read, path: join(liveDir(stateDir), liveName(key) as string) };
}

describe('live copy', () => {
  it('creates nothing until the first output, then a 0600 file in a 0700 directory, removed at the end', async () => {
    const box = sandbox();
    const live = pair(box.stateDir);
    expect(await live.pump()).toBe('waiting');
    await live.copy.drained();
    expect(() => statSync(liveDir(box.stateDir))).toThrow();
    live.copy.push(Buffer.from('one\n'));
    await live.copy.drained();
    expect(statSync(live.path).mode & 0o777).toBe(0o600);
    expect(statSync(liveDir(box.stateDir)).mode & 0o777).toBe(0o700);
    expect(await live.pump()).toBe('waiting');
    live.copy.remove();
    expect(await live.pump()).toBe('removed');
    expect(live.read()).toBe('one\n');
    expect(readdirSync(liveDir(box.stateDir))).toEqual([]);
  });

  it('starts a new file past its cap; a reader that keeps up loses nothing and keeps the order', async () => {
    const box = sandbox();
    const live = pair(box.stateDir, 100);
    let written = '';
    for (let i = 0; i < 40; i++) {
      const line = `line ${String(i).padStart(2, '0')}\n`;
      written += line;
      live.copy.push(Buffer.from(line));
      // Read now and then, so the reader holds a file when the copy moves on from it.
      if (i % 7 === 3) {
        await live.copy.drained();
        expect(await live.pump()).toBe('waiting');
      }
    }
    await live.copy.drained();
    expect(statSync(live.path).size).toBeLessThan(100 + 40);
    await live.pump();
    live.copy.remove();
    expect(await live.pump()).toBe('removed');
    expect(live.read()).toBe(written);
    expect(live.notes).toEqual([]);
  });

  it('stops, with a note for -v, when it cannot write, and never throws at the job', async () => {
    const box = sandbox();
    writeFileSync(box.path('file'), '');
    const live = pair(box.path('file'));
    live.copy.push(Buffer.from('x'));
    live.copy.push(Buffer.from('y'));
    await live.copy.drained();
    live.copy.remove();
    expect(live.notes).toEqual([expect.stringMatching(/^j: live copy of the output for logs -f stopped: state directory \S+ is not a directory$/)]);
  });
});

describe('live copy that stops mid-run', () => {
  it('leaves a note saying why, for followers, removed with the copy', async () => {
    const box = sandbox();
    const live = pair(box.stateDir, 10);
    live.copy.push(Buffer.from('first\n'));
    await live.copy.drained();
    // Something in the way of the next file: the copy cannot move on past its cap.
    writeFileSync(`${live.path}.next`, '');
    expect(live.reader.stoppedWhy()).toBeNull();
    live.copy.push(Buffer.from('second\n'));
    await live.copy.drained();
    live.copy.push(Buffer.from('third\n'));
    await live.copy.drained();
    expect(live.reader.stoppedWhy()).toMatch(/\.next already exists$/);
    await live.pump();
    expect(live.read()).toBe('first\nsecond\n');
    live.copy.remove();
    expect(readdirSync(liveDir(box.stateDir))).toEqual([`${liveName(live.key)}.next`]);
  });
});

describe('sweepStale', () => {
  it('removes the live files of wrappers that are gone, and only those', () => {
    const box = sandbox();
    const dir = liveDir(box.stateDir);
    const [boot, start] = (processStart(process.pid) as string).split('/');
    const mine = `${boot}_${start}_${process.pid}_1`;
    const dead = `${boot}_1_999999999_1`;
    const other = 'notes.txt';
    mkdirSync(dir, { recursive: true });
    for (const name of [mine, dead, `${dead}.uncaptured`, other]) writeFileSync(join(dir, name), '');
    sweepStale(dir);
    expect(readdirSync(dir).sort()).toEqual([mine, other].sort());
  });
});
