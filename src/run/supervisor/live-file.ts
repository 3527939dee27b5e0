import { readdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { isSameProcess } from '../../util/process-id.js';
import { ownSubdir } from '../../util/sharing.js';

// Where a running job's output is copied for `logs -f`, and how its files are named. The
// wrapper writes, `logs -f` reads; both derive the names from the run's key alone, so the
// reader needs nothing but the run's row.

// Inside the state directory: private (0700), like the run log next to it; in root's shared
// one, each member has its own (see ownSubdir), so a run is followed live by its own user
// and root's by root.
export const LIVE_DIR = 'live';
// A run whose output is not captured (--capture 0 without -q) leaves this marker instead,
// so that `logs -f` can say so at once rather than wait for output that never comes.
export const UNCAPTURED_SUFFIX = '.uncaptured';
// Left when the copy stopped before the run ended (a full disk, a disk too slow for the
// job), holding why, so that a follower does not wait for output that no longer comes.
export const STOPPED_SUFFIX = '.stopped';
// The next file, written under this name and renamed over the live one when the copy
// passes its size cap.
export const NEXT_SUFFIX = '.next';

export function liveDir(stateDir: string): string {
  return ownSubdir(stateDir, LIVE_DIR);
}

// The file name of a run's live copy: its run key (`<boot id>/<start>/<pid>/<n>/<random>`, see
// newRunKey) with `_` for `/`. A key of any other shape, as a hostile or foreign row of a
// shared log could hold, has no live copy: it never becomes a path.
export function liveName(runKey: string | null): string | null {
  if (runKey === null) return null;
  const name = runKey.replaceAll('/', '_');
  return NAME.test(name) ? name : null;
}

const NAME = /^[A-Za-z0-9-]+_[A-Za-z0-9]+_\d+_\d+(?:_[0-9a-f]+)?$/;
const ENTRY = /^([A-Za-z0-9-]+)_([A-Za-z0-9]+)_(\d+)_\d+(?:_[0-9a-f]+)?(?:\.[a-z]+)?$/;

// Removes the live files of wrappers that are gone (killed before they could clean up),
// leaving those of running wrappers alone. Called by a wrapper after its own run, so the
// directory never holds more than the runs in progress and the last few that crashed.
// unlink(2) never follows a link, so a planted one is removed, not its target.
export function sweepStale(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const key = ENTRY.exec(name);
    if (!key || isSameProcess(Number(key[3]), `${key[1]}/${key[2]}`)) continue;
    try {
      unlinkSync(join(dir, name));
    } catch {
      // Another wrapper swept it first, or it is not ours to remove: either way not our run.
    }
  }
}
