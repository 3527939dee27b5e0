import { closeSync, constants, renameSync, writeSync, writev } from 'node:fs';
import { join } from 'node:path';
import { describe } from '../../errors.js';
import { type Messages, mkdirp } from '../../util/io.js';
import { checkPrivateDirectory, createExclusive, preparePrivateDirectory } from '../../util/safe-path.js';
import { moveAsideUnlessRoots } from '../../util/sharing.js';
import { unlinkQuietly } from '../../util/stamp.js';
import { ByteRing } from './byte-ring.js';
import { liveDir, liveName, NEXT_SUFFIX, STOPPED_SUFFIX, sweepStale, UNCAPTURED_SUFFIX } from './live-file.js';

// Past this size the copy moves on to a fresh file (renamed over the old one): the state
// directory holds at most about this much per running job, however much it prints. A
// follower that keeps up loses nothing, as it reads the old file to its end first.
export const LIVE_CAP_BYTES = 16 * 1024 * 1024;
// This much output waiting for the disk means the disk cannot keep up; the copy stops
// rather than hold the job's output in memory.
const MAX_QUEUED_BYTES = 4 * 1024 * 1024;
// Output is gathered for up to this long (or this much) and written in one go: a job that
// prints line by line would otherwise cost a write, and a trip through libuv's thread
// pool, per line. A follower sees it this much later at most.
const GATHER_MS = 50;
const GATHER_BYTES = 64 * 1024;

// A copy of one attempt's output, as it arrives, in `<state dir>/live/<run key>`, for
// `cronguard logs -f` to follow from any terminal of this host. It must never slow or fail
// the job: nothing happens until the first output (a run without output pays nothing),
// writes are asynchronous and in order, and any failure (no space, a file planted in its
// place) only stops the copy, with a note under -v. The file is 0600 in a 0700 directory
// (it holds the job's output) and is removed when the attempt's outcome is recorded.
export class LiveCopy {
  private readonly dir: string;
  private readonly name: string | null;
  private fd: number | null = null;
  private stopped = false;
  private touched = false;
  private created: string[] = [];
  // What waits for the disk, the write in flight included.
  private queue = new ByteRing(MAX_QUEUED_BYTES);
  private writing = false;
  private size = 0;
  private timer: NodeJS.Timeout | null = null;
  private idle: (() => void) | null = null;

  constructor(
    private readonly stateDir: string,
    runKey: string,
    private readonly job: string,
    private readonly say: Messages,
    private readonly cap = LIVE_CAP_BYTES,
  ) {
    this.dir = liveDir(stateDir);
    this.name = liveName(runKey);
    if (this.name === null) this.stopped = true;
  }

  push(chunk: Buffer): void {
    if (this.stopped || chunk.length === 0) return;
    if (this.fd === null && !this.open()) return;
    if (!this.queue.push(chunk, false)) this.stop('the disk is not keeping up');
    else if (this.queue.length >= GATHER_BYTES) this.writeNext();
    else this.timer ??= setTimeout(() => this.writeNext(), GATHER_MS);
  }

  // The output goes straight to cronguard's own stdout and stderr, so there is nothing to
  // copy; the marker tells a follower so.
  markUncaptured(): void {
    if (this.stopped) return;
    const fd = this.create(`${this.name}${UNCAPTURED_SUFFIX}`, 'marker');
    if (fd !== null) closeSync(fd);
    this.stopped = true;
  }

  // Resolves once everything pushed so far is on disk (or the copy stopped): before the
  // attempt's outcome is recorded, so that a follower who sees the outcome has all the
  // output to read.
  async drained(): Promise<void> {
    if (!this.writing && this.queue.length === 0) return;
    const idle = new Promise<void>((resolve) => (this.idle = resolve));
    this.writeNext();
    await idle;
  }

  // Removes this attempt's files, and those of wrappers that died without removing theirs.
  remove(): void {
    this.stopped = true;
    this.release();
    for (const name of this.created.splice(0)) unlinkQuietly(join(this.dir, name));
    if (this.touched) sweepStale(this.dir);
  }

  private open(): boolean {
    this.fd = this.create(this.name as string, 'file');
    return this.fd !== null;
  }

  // Creates `name` exclusively in the private directory; null (copy stopped) when it cannot.
  private create(name: string, what: string): number | null {
    try {
      // The state directory first: nothing is made inside one that is not ours alone (root's
      // run log refuses another user's; so must its live copy).
      // In root's shared state directory, a member may have made `live` first.
      if (preparePrivateDirectory(this.stateDir, 'state directory') !== null) moveAsideUnlessRoots(this.dir);
      mkdirp(this.dir, 0o700);
      checkPrivateDirectory(this.dir, 'live output directory');
      this.touched = true;
      const fd = createExclusive(this.dir, name, `live output ${what}`, 0o600, constants.O_APPEND);
      if (fd === null) throw new Error(`${join(this.dir, name)} already exists`);
      if (!name.endsWith(NEXT_SUFFIX)) this.created.push(name);
      return fd;
    } catch (error) {
      this.stop(describe(error));
      return null;
    }
  }

  // One write at a time, of everything queued, so the file keeps the order of arrival.
  private writeNext(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.writing || this.fd === null || this.queue.length === 0) {
      this.settle();
      return;
    }
    // All that is queued, in place (output pushed meanwhile goes in after it).
    this.writing = true;
    const queue = this.queue;
    writev(this.fd, queue.views(), null, (error, written) => {
      this.writing = false;
      if (this.stopped) return this.release();
      if (error) return this.stop(describe(error));
      queue.consume(written);
      this.size += written;
      if (this.size >= this.cap) this.startOver();
      this.writeNext();
    });
  }

  // The next file is complete before it replaces the old one, so the name always exists
  // while the run lasts: a follower tells a restart (a new file under the name) from the
  // end of the run (no file).
  private startOver(): void {
    const next = `${this.name}${NEXT_SUFFIX}`;
    const fd = this.create(next, 'file');
    if (fd === null) return;
    try {
      renameSync(join(this.dir, next), join(this.dir, this.name as string));
    } catch (error) {
      closeSync(fd);
      unlinkQuietly(join(this.dir, next));
      this.stop(describe(error));
      return;
    }
    closeSync(this.fd as number);
    this.fd = fd;
    this.size = 0;
  }

  private stop(why: string): void {
    const first = !this.stopped;
    this.stopped = true;
    this.queue = new ByteRing(0);
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.release();
    if (!first) return;
    this.say.verbose(`${this.job}: live copy of the output for logs -f stopped: ${why}`);
    if (this.created.includes(this.name as string)) this.leaveNote(why);
  }

  // Tells followers why the copy ends here (best effort: it may be the disk that is full).
  private leaveNote(why: string): void {
    const fd = this.create(`${this.name}${STOPPED_SUFFIX}`, 'marker');
    if (fd === null) return;
    try {
      writeSync(fd, why);
    } catch {
      // An empty note still says that the copy stopped.
    } finally {
      closeSync(fd);
    }
  }

  // Closes the file once no write is in flight: closing under a pending write could let
  // the descriptor's number be reused and the write land in another file.
  private release(): void {
    if (this.writing) return;
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    this.settle();
  }

  private settle(): void {
    if (this.writing || this.queue.length > 0) return;
    const idle = this.idle;
    this.idle = null;
    idle?.();
  }
}
