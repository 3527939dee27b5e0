import { closeSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type StreamId = 1 | 2;

// Past this much buffered output, -q spills to a temporary file instead of growing memory.
export const SPILL_AFTER_BYTES = 4 * 1024 * 1024;

// Holds a quiet (-q) run's output in arrival order so it can be replayed, stream by stream,
// if the command fails. The spill file is unlinked as soon as it is open: nothing is left
// behind even if cronguard is killed.
export class QuietBuffer {
  private memory: { stream: StreamId; chunk: Buffer }[] = [];
  private bytes = 0;
  private spillFd: number | null = null;

  constructor(private spillAfter = SPILL_AFTER_BYTES) {}

  push(stream: StreamId, chunk: Buffer): void {
    if (this.spillFd === null && this.bytes + chunk.length > this.spillAfter) this.startSpill();
    if (this.spillFd === null) {
      this.memory.push({ stream, chunk });
      this.bytes += chunk.length;
      return;
    }
    const header = Buffer.alloc(5);
    header.writeUInt8(stream, 0);
    header.writeUInt32BE(chunk.length, 1);
    writeSync(this.spillFd as number, header);
    writeSync(this.spillFd as number, chunk);
  }

  // Writes everything held to `write(stream, chunk)` in the order it arrived, waiting for
  // each write: the spill file is read back a record at a time, so a replay of any size
  // needs no more memory than one chunk.
  async replay(write: (stream: StreamId, chunk: Buffer) => Promise<void>): Promise<void> {
    for (const { stream, chunk } of this.memory) await write(stream, chunk);
    if (this.spillFd === null) return;
    const fd = this.spillFd;
    const header = Buffer.alloc(5);
    let position = 0;
    while (readSync(fd, header, 0, 5, position) === 5) {
      const length = header.readUInt32BE(1);
      const chunk = Buffer.alloc(length);
      readSync(fd, chunk, 0, length, position + 5);
      await write(header.readUInt8(0) as StreamId, chunk);
      position += 5 + length;
    }
  }

  dispose(): void {
    if (this.spillFd !== null) closeSync(this.spillFd);
    this.spillFd = null;
    this.memory = [];
  }

  private startSpill(): void {
    const path = join(tmpdir(), `cronguard-quiet-${process.pid}-${Date.now()}`);
    try {
      this.spillFd = openSync(path, 'wx+', 0o600);
      unlinkSync(path);
    } catch {
      // No usable temporary directory: losing the output of a failing job would be worse
      // than the memory, so keep buffering in memory.
      this.spillAfter = Number.POSITIVE_INFINITY;
    }
  }
}

// Keeps the last `limit` bytes of everything pushed, for the run log's `output` column.
export class TailBuffer {
  private chunks: Buffer[] = [];
  private kept = 0;
  private seen = 0;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.seen += chunk.length;
    if (this.limit === 0) return;
    this.chunks.push(chunk);
    this.kept += chunk.length;
    while (this.chunks.length > 1 && this.kept - (this.chunks[0] as Buffer).length >= this.limit) {
      this.kept -= (this.chunks.shift() as Buffer).length;
    }
  }

  get truncated(): boolean {
    return this.limit > 0 && this.seen > this.limit;
  }

  // The kept bytes as text. A cut through a multi-byte character drops its orphaned tail
  // bytes rather than storing a replacement character.
  text(): string | null {
    if (this.limit === 0) return null;
    let bytes = Buffer.concat(this.chunks);
    if (bytes.length > this.limit) bytes = bytes.subarray(bytes.length - this.limit);
    let start = 0;
    while (this.truncated && start < 4 && start < bytes.length && ((bytes[start] as number) & 0xc0) === 0x80) {
      start++;
    }
    return bytes.subarray(start).toString('utf8');
  }
}
