export type StreamId = 1 | 2;

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
