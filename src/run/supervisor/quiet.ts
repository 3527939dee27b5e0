import { closeSync, openSync, readSync, unlinkSync, writeSync, writevSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from '../../errors.js';
import { YoungCollector } from '../../util/young-gc.js';
import type { StreamId } from './output.js';

// Past this much held output, -q spills to a temporary file instead of growing memory.
export const SPILL_AFTER_BYTES = 4 * 1024 * 1024;
// When the temporary file takes no more (no usable temporary directory, a full disk), up to
// this much more is held in memory; past it, the rest is not held, and the replay says so.
// Unbounded memory would trade a failing job's output for an out-of-memory kill of the run.
export const FALLBACK_BYTES = 16 * 1024 * 1024;

// A line of cronguard's own held among the output (see note).
const NOTE = 0;
type HeldStream = StreamId | typeof NOTE;

interface Held {
  readonly stream: HeldStream;
  readonly chunk: Buffer;
}

// Holds a quiet (-q) run's output in arrival order so it can be replayed, stream by stream,
// if the command fails: in memory, then in a temporary file (unlinked as soon as it is
// open, so nothing is left behind even if cronguard is killed), then, if that file fails,
// in memory again up to a bound. Nothing is dropped without the replay saying so. With
// --retries it holds every attempt's output, and the lines that said an attempt failed and
// would be retried, until the last attempt: shown if that fails, never if one succeeds.
export class QuietBuffer {
  private before: Held[] = [];
  private after: Held[] = [];
  private inMemory = 0;
  private spillFd: number | null = null;
  // Where the spill file's last whole record ends: a write cut short (a full disk) leaves
  // a partial record beyond it, which the replay never reads.
  private spillEnd = 0;
  // Why the spill file takes no more; null while it is unused or works.
  private spillFailure: string | null = null;
  private dropped = 0;
  private readonly header = Buffer.alloc(5);

  constructor(
    private readonly spillAfter = SPILL_AFTER_BYTES,
    private readonly fallback = FALLBACK_BYTES,
  ) {}

  push(stream: StreamId, chunk: Buffer): void {
    this.hold(stream, chunk);
  }

  // A line of cronguard's own ("failed ...; retrying in 10s"), said in its place among the
  // output when it is replayed. Never dropped: a line, and the one that explains the rest.
  note(line: string): void {
    this.hold(NOTE, Buffer.from(line));
  }

  // Whether anything is held (or was dropped) that no replay has shown yet.
  get holding(): boolean {
    return this.before.length > 0 || this.after.length > 0 || this.spillEnd > 0 || this.dropped > 0;
  }

  private hold(stream: HeldStream, chunk: Buffer): void {
    if (stream === NOTE && (this.dropped > 0 || this.spillFailure !== null)) {
      this.after.push({ stream, chunk });
      return;
    }
    // Once output is dropped, all that follows is, so the replay has no hidden gap.
    if (this.dropped > 0) {
      this.dropped += chunk.length;
      return;
    }
    if (this.spillFd === null && this.spillFailure === null && this.inMemory + chunk.length > this.spillAfter) this.startSpill();
    // After one failed write the file takes nothing more, even a chunk that would fit: what
    // follows is in memory, and would otherwise be replayed before it.
    if (this.spillFd !== null && this.spillFailure === null && this.spill(stream, chunk)) return;
    const room = this.spillFailure === null ? this.spillAfter : this.spillAfter + this.fallback;
    if (this.inMemory + chunk.length > room) {
      this.dropped = chunk.length;
      return;
    }
    (this.spillFailure === null ? this.before : this.after).push({ stream, chunk });
    this.inMemory += chunk.length;
  }

  // Writes everything held to `write(stream, chunk)` in the order it arrived, waiting for
  // each write, and its notes to `say`: the spill file is read back a record at a time, so
  // a replay of any size needs no more memory than one chunk. Returns what could not be
  // replayed, or null. What was shown is let go: a second replay shows only what came after.
  async replay(write: (stream: StreamId, chunk: Buffer) => Promise<void>, say: (line: string) => void): Promise<string | null> {
    const out = async (stream: HeldStream, chunk: Buffer) => (stream === NOTE ? say(chunk.toString()) : write(stream, chunk));
    for (const { stream, chunk } of this.before) await out(stream, chunk);
    const unread = this.spillFd === null ? null : await this.replaySpill(this.spillFd, out);
    for (const { stream, chunk } of this.after) await out(stream, chunk);
    const memory = (this.spillAfter + this.fallback) / 1024 / 1024;
    const dropped =
      this.dropped === 0
        ? null
        : `-q held only part of its output: the last ${this.dropped} bytes were dropped (temporary file: ${this.spillFailure}; at most ${memory} MiB is held in memory)`;
    this.dispose();
    this.inMemory = 0;
    this.spillEnd = 0;
    this.dropped = 0;
    return [unread, dropped].filter(Boolean).join('; ') || null;
  }

  dispose(): void {
    if (this.spillFd !== null) closeSync(this.spillFd);
    this.spillFd = null;
    this.before = [];
    this.after = [];
  }

  private startSpill(): void {
    const path = join(tmpdir(), `cronguard-quiet-${process.pid}-${Date.now()}`);
    try {
      this.spillFd = openSync(path, 'wx+', 0o600);
      unlinkSync(path);
    } catch (error) {
      if (this.spillFd !== null) closeSync(this.spillFd);
      this.spillFd = null;
      this.spillFailure = `${path}: ${describe(error)}`;
    }
  }

  // Appends one record (stream, length, bytes); false when the file took no more of it.
  // The chunk is written as it is, not copied behind its header: a gigabyte of output would
  // otherwise be a gigabyte more of buffers for the garbage collector, and of peak memory.
  private spill(stream: HeldStream, chunk: Buffer): boolean {
    const header = this.header;
    header.writeUInt8(stream, 0);
    header.writeUInt32BE(chunk.length, 1);
    const fd = this.spillFd as number;
    const length = header.length + chunk.length;
    try {
      // A short write (a disk filling up) is finished piece by piece.
      for (let done = writevSync(fd, [header, chunk], this.spillEnd); done < length; ) {
        const [from, at] = done < header.length ? [header, done] : [chunk, done - header.length];
        done += writeSync(fd, from, at, from.length - at, this.spillEnd + done);
      }
      this.spillEnd += length;
      return true;
    } catch (error) {
      // What the file holds stays, and is replayed first; from here on, memory.
      this.spillFailure = `${tmpdir()}: ${describe(error)}`;
      return false;
    }
  }

  private async replaySpill(fd: number, write: (stream: HeldStream, chunk: Buffer) => Promise<void>): Promise<string | null> {
    const header = Buffer.alloc(5);
    const collector = new YoungCollector();
    let position = 0;
    try {
      while (position < this.spillEnd) {
        readWhole(fd, header, position);
        const chunk = Buffer.allocUnsafe(header.readUInt32BE(1));
        readWhole(fd, chunk, position + 5);
        await write(header.readUInt8(0) as HeldStream, chunk);
        collector.passed(chunk.length);
        position += 5 + chunk.length;
      }
      return null;
    } catch (error) {
      return `-q could not read back ${this.spillEnd - position} bytes of its output from the temporary file (${describe(error)})`;
    }
  }
}

// Reads exactly buffer.length bytes at `position`; a file that ends early is an error.
function readWhole(fd: number, buffer: Buffer, position: number): void {
  if (readSync(fd, buffer, 0, buffer.length, position) !== buffer.length) throw new Error('the file ended early');
}
