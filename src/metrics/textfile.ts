import { closeSync, constants, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe } from '../errors.js';
import type { RunStore } from '../store/run-store.js';
import type { Messages } from '../util/io.js';
import { exposition } from './exposition.js';

// A job's Prometheus textfile (--metrics-dir), rewritten when its run starts and ends. The
// collector must never read half a file, so each version is written beside it and renamed
// into place; a file it cannot write costs the job nothing but one warning.
export class Textfile {
  private warned = false;

  constructor(
    private readonly dir: string,
    private readonly job: string,
    private readonly say: Messages,
  ) {}

  get path(): string {
    return join(this.dir, `cronguard_${this.job}.prom`);
  }

  // From the job's status in the log (nothing while the log cannot be written).
  async update(store: RunStore | null): Promise<void> {
    try {
      const [job] = store ? await store.jobStatus(this.job) : [];
      if (job) writeAtomically(this.dir, this.path, await exposition([job]));
    } catch (error) {
      if (this.warned) return;
      this.warned = true;
      this.say.warn(`${this.job}: cannot write metrics to ${this.path} (${describe(error)}); the job is not affected`);
    }
  }
}

// O_EXCL and O_NOFOLLOW: nothing planted at the temporary name is written through; rename
// replaces whatever is at the final name (a link included) rather than following it. The
// file is 0644: the collector usually runs as another user.
function writeAtomically(dir: string, path: string, text: string): void {
  const temp = join(dir, `.${path.slice(dir.length + 1)}.${process.pid}.${Date.now()}.tmp`);
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  try {
    const bytes = Buffer.from(text);
    for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done);
    closeSync(fd);
    renameSync(temp, path);
  } catch (error) {
    closeQuietly(fd);
    try {
      unlinkSync(temp);
    } catch {
      // Never created or already renamed.
    }
    throw error;
  }
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Closed already.
  }
}
