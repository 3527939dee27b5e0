import { closeSync, constants, futimesSync, openSync, statSync, unlinkSync } from 'node:fs';
import { preparePrivateDirectory } from './safe-path.js';

// Stamp files in the state dir: facts a host remembers between runs so that most runs need
// not ask the database (see housekeeping.ts and the schema stamp of PostgresStore).

// Whether `file` was touched after `since` (ms since the epoch); false when it is missing.
export function touchedSince(file: string, since: number): boolean {
  try {
    return statSync(file).mtimeMs > since;
  } catch {
    return false;
  }
}

// A shared log's runs may not have needed the state dir yet: it is made as the embedded log
// makes it, private. Whatever is already at the stamp's name is never followed.
export function touch(dir: string, file: string, now: number): void {
  try {
    preparePrivateDirectory(dir, 'state directory');
    // Through the descriptor: a link someone put in its place is neither followed nor touched.
    const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
    try {
      futimesSync(fd, now / 1000, now / 1000);
    } finally {
      closeSync(fd);
    }
  } catch {
    // No stamp: the next run asks again.
  }
}

// Removes a file that may be gone already (or be no file: it then holds nothing either way).
// Not fs.rmSync, which loads Node's recursive remover on every call.
export function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // Already gone.
  }
}
