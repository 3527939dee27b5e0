import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

// What cronguard's own stdout and stderr are, for where its summary line starts.

// Which file one of our output streams goes to: the same key for both when they share it.
export function sinkOf(fd: number): string {
  try {
    const { dev, ino } = fstatSync(fd);
    return `${dev}:${ino}`;
  } catch {
    return `fd${fd}`;
  }
}

// Whether the regular file behind `fd` ends in the middle of a line; null when `fd` is not
// a regular file, or cannot be read. It is reopened through /proc for reading, as stderr is
// usually open for writing only.
export function fileEndsMidLine(fd: number): boolean | null {
  let reader: number | null = null;
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return null;
    if (stat.size === 0) return false;
    reader = openSync(`/proc/self/fd/${fd}`, constants.O_RDONLY | constants.O_NONBLOCK);
    const last = Buffer.alloc(1);
    return readSync(reader, last, 0, 1, stat.size - 1) === 1 ? last[0] !== 0x0a : null;
  } catch {
    return null;
  } finally {
    if (reader !== null) closeSync(reader);
  }
}
