// A fixed amount of the command's output, copied into one buffer made on first use and
// reused from then on, oldest bytes first. The relay keeps its tail for the run log, and the
// live copy its bytes on the way to disk, in these rather than by holding on to the chunks
// Node reads from the pipes: a chunk held for a while outlives a garbage collection or two,
// and a gigabyte of output then leaves tens of megabytes of dead chunks behind, which only a
// full collection frees. Copied, every chunk dies young and goes at the next one.
export class ByteRing {
  private buffer: Buffer | null = null;
  private start = 0;
  private held = 0;

  constructor(readonly capacity: number) {}

  get length(): number {
    return this.held;
  }

  // Copies `chunk` in after what is held. With `evict`, the oldest bytes make room (of a
  // chunk larger than the ring, its end is kept); without, a chunk that does not fit is not
  // taken, and false says so.
  push(chunk: Buffer, evict: boolean): boolean {
    if (this.capacity === 0) return chunk.length === 0;
    if (!evict && this.held + chunk.length > this.capacity) return false;
    const bytes = chunk.length > this.capacity ? chunk.subarray(chunk.length - this.capacity) : chunk;
    const overflow = this.held + bytes.length - this.capacity;
    if (overflow > 0) this.consume(overflow);
    this.buffer ??= Buffer.allocUnsafeSlow(this.capacity);
    const end = (this.start + this.held) % this.capacity;
    const first = Math.min(bytes.length, this.capacity - end);
    bytes.copy(this.buffer, end, 0, first);
    bytes.copy(this.buffer, 0, first);
    this.held += bytes.length;
    return true;
  }

  // What is held, oldest first, as one or two views of the ring: valid until bytes they
  // show are consumed and written over.
  views(): Buffer[] {
    if (this.buffer === null || this.held === 0) return [];
    const first = Math.min(this.held, this.capacity - this.start);
    const views = [this.buffer.subarray(this.start, this.start + first)];
    if (first < this.held) views.push(this.buffer.subarray(0, this.held - first));
    return views;
  }

  // Lets go of the oldest `bytes`.
  consume(bytes: number): void {
    const n = Math.min(bytes, this.held);
    this.start = this.held === n ? 0 : (this.start + n) % this.capacity;
    this.held -= n;
  }
}
