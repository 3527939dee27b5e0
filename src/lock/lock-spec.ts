import { join } from 'node:path';
import type { RedisTarget } from './redis/target.js';

// The lock of one invocation as the CLI resolved it: each kind with only its own fields.
// `-l postgres` is the advisory lock, `-l mysql` the named GET_LOCK; the kinds that live in
// the fleet's database carry it, as a `Db` that only the store layer reads.
export type LockSpec<Db = unknown> =
  | { readonly kind: 'flock'; readonly path: string; readonly dir: LockDir | null; readonly byHand: boolean }
  | { readonly kind: 'lockfile'; readonly dir: LockDir; readonly job: string }
  | { readonly kind: 'advisory'; readonly key: bigint; readonly byHand: boolean; readonly db: Db }
  | { readonly kind: 'named'; readonly name: string; readonly db: Db }
  | { readonly kind: 'lease'; readonly key: bigint; readonly ttlMs: number; readonly db: Db }
  // A lease on a Redis key (lock/redis/): `key` is the lock's key, `ticks` whether the lock
  // keeps the fleet's one run per tick (when no shared log keeps it).
  | { readonly kind: 'redis'; readonly target: RedisTarget; readonly key: string; readonly ttlMs: number; readonly ticks: boolean }
  | { readonly kind: 'none' };

export type LockKind = LockSpec['kind'];

// The lock directory: where lock files live, and whether it is the default one (see
// ensureLockDir) rather than one the user chose.
export interface LockDir {
  readonly path: string;
  readonly isDefault: boolean;
}

// The lock's name on the command line and in the run log's lock_backend column.
export type LockBackendName = 'flock' | 'lockfile' | 'postgres' | 'mysql' | 'lease' | 'redis' | 'none';

// The backend each kind is recorded as.
const BACKEND: Readonly<Record<LockKind, LockBackendName>> = {
  flock: 'flock',
  lockfile: 'lockfile',
  advisory: 'postgres',
  named: 'mysql',
  lease: 'lease',
  redis: 'redis',
  none: 'none',
};

export function backendOf(spec: LockSpec): LockBackendName {
  return BACKEND[spec.kind];
}

// Taken by the fleet database's admission statement (the advisory lock, GET_LOCK, a lease),
// as against a lock of this machine: any host may settle a run left under it.
export function inDatabase(backend: string | null): boolean {
  return backend === 'postgres' || backend === 'mysql' || backend === 'lease';
}

// Held by a server session (the advisory lock, GET_LOCK), which the server can be asked
// about; a lease's holder is its row.
export function heldBySession(backend: string | null): boolean {
  return backend === 'postgres' || backend === 'mysql';
}

// A lock file of this machine's, whose holder /proc/locks or the lock directory names; of
// another kind on this host (Redis), the run log and the wrapper that still runs are all
// `cronguard locks` can go by without asking its server.
export function onThisMachine(backend: string | null): boolean {
  return backend === 'flock' || backend === 'lockfile';
}

// A lock of one host's own (a lock file, or none): what it excludes is on that host alone,
// so a run under it on another host shares nothing with this one's, its slots included.
export function ofOneHost(backend: string): boolean {
  return backend === 'flock' || backend === 'lockfile' || backend === 'none';
}

// A lock file of this machine's: holding it proves that whatever held it before has ended,
// pid reused or not.
export function provesHoldersGone(spec: LockSpec): boolean {
  return spec.kind === 'flock' || spec.kind === 'lockfile';
}

// The file of an flock(2) lock, which /proc/locks can name a holder of; null for other kinds.
export function flockPath(spec: LockSpec): string | null {
  return spec.kind === 'flock' ? spec.path : null;
}

// The lock directory of an flock(2) lock in the default one (another user's runs of the job
// lock files of their own there); null otherwise.
export function defaultFlockDir(spec: LockSpec): LockDir | null {
  return spec.kind === 'flock' && spec.dir?.isDefault ? spec.dir : null;
}

// The lock was named by hand (--lock-file, --lock-key), so other jobs may share it.
export function mayBeShared(spec: LockSpec): boolean {
  return (spec.kind === 'flock' || spec.kind === 'advisory') && spec.byHand;
}

// What the run row records as its lock (lock_key), for `cronguard locks`.
export function recordedKey(spec: LockSpec): string | null {
  switch (spec.kind) {
    case 'flock':
      return spec.path;
    case 'lockfile':
      return join(spec.dir.path, `${spec.job}.lockdir`);
    case 'advisory':
    case 'lease':
      return String(spec.key);
    case 'named':
      return spec.name;
    case 'redis':
      return spec.key;
    case 'none':
      return null;
  }
}
