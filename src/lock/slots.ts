import type { LockSpec } from './lock-spec.js';

// The most copies --max-running lets run at once.
export const MAX_SLOTS = 64;

// A job that may run N copies at once (--max-running N) has N slots, each a lock of the
// job's kind of its own; a copy runs holding the first free one. Slot 0 is the job's lock as
// it is without --max-running, so N = 1 is exactly that lock, and a holder of it (util-linux
// flock on a --lock-file, an application's advisory lock) still holds a slot. Slot i > 0 is
// derived from it by a rule each kind documents: '#' is in no job's name, so a derived file,
// directory or key is never another job's; an advisory key moves by i·2^32, away from the
// small numbers people give --lock-key by hand.
export function slotLocks<Db>(spec: LockSpec<Db>, slots: number): readonly LockSpec<Db>[] {
  return Array.from({ length: slots }, (_, slot) => (slot === 0 ? spec : slotLock(spec, slot)));
}

function slotLock<Db>(spec: LockSpec<Db>, slot: number): LockSpec<Db> {
  switch (spec.kind) {
    case 'flock':
      return { ...spec, path: `${spec.path}#${slot}` };
    case 'lockfile':
      return { ...spec, job: `${spec.job}#${slot}` };
    case 'advisory':
    case 'lease':
      return { ...spec, key: BigInt.asIntN(64, spec.key + (BigInt(slot) << 32n)) };
    case 'named':
      return { ...spec, name: `${spec.name}#${slot}` };
    case 'redis':
      return { ...spec, key: `${spec.key}#${slot}` };
    case 'none':
      return spec;
  }
}

// The job and slot a file of a lock directory is for, by the rule above: NAME.lock and
// NAME.lock#I (flock), NAME.lockdir and NAME#I.lockdir (lockfile); null for any other file.
export function slotFile(name: string): { readonly job: string; readonly lock: 'flock' | 'lockfile'; readonly slot: number } | null {
  const m = /^([^#]+)\.lock(?:#(\d+))?$/.exec(name) ?? /^([^#]+?)(?:#(\d+))?\.lockdir$/.exec(name);
  if (!m) return null;
  return { job: m[1] as string, lock: name.endsWith('.lockdir') ? 'lockfile' : 'flock', slot: Number(m[2] ?? 0) };
}
