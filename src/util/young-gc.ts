import { createRequire } from 'node:module';

// Every chunk Node reads from a pipe is a new 64 KiB buffer outside V8's heap, which V8 only
// frees when its collector runs: with a fast writer that is 20 to 30 MiB of dead chunks
// later, and cronguard's peak memory grew by that much (a gigabyte through -q peaked over
// 100 MiB). Relaying that much output, cronguard asks for a young-generation collection, a
// fraction of a millisecond, every few MiB: the chunks are dead by then and go at once.
const EVERY_BYTES = 8 * 1024 * 1024;

type Collect = (options: { type: 'minor' }) => void;
let collect: Collect | null | undefined;

function collector(): Collect | null {
  if (collect === undefined) {
    try {
      // Exposes gc() to contexts made from now on; the code already compiled, and its cache,
      // are unaffected. (node:v8 loads here, not with every run.)
      const load = createRequire(import.meta.url);
      (load('node:v8') as typeof import('node:v8')).setFlagsFromString('--expose-gc');
      collect = (load('node:vm') as typeof import('node:vm')).runInNewContext('gc') as Collect;
    } catch {
      collect = null;
    }
  }
  return collect;
}

// Counts bytes passed along; collects each time another EVERY_BYTES have gone by.
export class YoungCollector {
  private bytes = 0;

  passed(bytes: number): void {
    const before = Math.floor(this.bytes / EVERY_BYTES);
    this.bytes += bytes;
    if (Math.floor(this.bytes / EVERY_BYTES) === before) return;
    try {
      collector()?.({ type: 'minor' });
    } catch {
      // A runtime whose gc() takes no such request: memory is left to V8 alone, as before.
      collect = null;
    }
  }
}
