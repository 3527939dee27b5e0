import { ByteRing } from './byte-ring.js';

export type StreamId = 1 | 2;

// Keeps the last `limit` bytes of everything pushed, for the run log's `output` column.
export class TailBuffer {
  private readonly ring: ByteRing;
  private seen = 0;

  constructor(limit: number) {
    this.ring = new ByteRing(limit);
  }

  push(chunk: Buffer): void {
    this.seen += chunk.length;
    this.ring.push(chunk, true);
  }

  get truncated(): boolean {
    return this.ring.capacity > 0 && this.seen > this.ring.capacity;
  }

  // The kept bytes as text. A cut through a multi-byte character drops its orphaned tail
  // bytes rather than storing a replacement character.
  text(): string | null {
    if (this.ring.capacity === 0) return null;
    const bytes = Buffer.concat(this.ring.views());
    let start = 0;
    while (this.truncated && start < 4 && start < bytes.length && ((bytes[start] as number) & 0xc0) === 0x80) {
      start++;
    }
    return bytes.subarray(start).toString('utf8');
  }
}
