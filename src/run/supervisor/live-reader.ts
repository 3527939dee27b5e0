import { closeSync, constants, fstatSync, lstatSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { openInDirectory } from '../../util/safe-path.js';
import { STOPPED_SUFFIX, UNCAPTURED_SUFFIX } from './live-file.js';

const CHUNK = 64 * 1024;

// What a read of the live copy found at its end: more may come, or the wrapper removed the
// copy, which it does once the run's outcome is recorded.
export type LiveState = 'waiting' | 'removed';

// Reads a running job's live copy (see LiveCopy) from its beginning. The file is opened
// as the lock and state files are: no symlink followed, nothing but a regular file read
// (a FIFO planted in its place would otherwise hang us). When the copy passes its size cap
// the wrapper renames a fresh file over it; the reader finishes the old one first, so it
// loses nothing as long as it keeps up.
export class LiveReader {
  private fd: number | null = null;
  private position = 0;
  // Bytes read over all of the copy's files.
  total = 0;

  constructor(
    readonly dir: string,
    private readonly name: string,
  ) {}

  get path(): string {
    return join(this.dir, this.name);
  }

  // Whether the run keeps no output at all (the wrapper's marker).
  uncaptured(): boolean {
    try {
      lstatSync(join(this.dir, `${this.name}${UNCAPTURED_SUFFIX}`));
      return true;
    } catch {
      return false;
    }
  }

  // Why the wrapper stopped copying before the run ended, if it did ('' when it could not
  // say); null while it copies.
  stoppedWhy(): string | null {
    let fd: number;
    try {
      fd = openInDirectory(this.dir, `${this.name}${STOPPED_SUFFIX}`, constants.O_RDONLY, 'live output marker');
    } catch {
      return null;
    }
    try {
      const text = Buffer.alloc(512);
      return text.subarray(0, readSync(fd, text, 0, text.length, 0)).toString('utf8');
    } finally {
      closeSync(fd);
    }
  }

  // Writes what the copy holds beyond what was read before, waiting for `write` each time.
  // Throws a CronguardError when something other than a regular file is in its place.
  async pump(write: (chunk: Buffer) => Promise<boolean>): Promise<LiveState> {
    if (this.fd === null && !this.open()) return 'waiting';
    for (;;) {
      const fd = this.fd as number;
      const chunk = Buffer.allocUnsafe(CHUNK);
      const n = readSync(fd, chunk, 0, CHUNK, this.position);
      if (n > 0) {
        this.position += n;
        this.total += n;
        if (!(await write(chunk.subarray(0, n)))) return 'waiting';
        continue;
      }
      // At its end. Still linked: the run goes on. Unlinked: a newer file took its name, or
      // the run is over and the copy was removed.
      if (fstatSync(fd).nlink > 0) return 'waiting';
      this.close();
      if (!this.open()) return 'removed';
    }
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    this.position = 0;
  }

  // Opens the copy; false while there is none (no output yet, or none any more).
  private open(): boolean {
    try {
      this.fd = openInDirectory(this.dir, this.name, constants.O_RDONLY, 'live output file');
      return true;
    } catch (error) {
      if ((error as { cause?: NodeJS.ErrnoException }).cause?.code === 'ENOENT') return false;
      throw error;
    }
  }
}
