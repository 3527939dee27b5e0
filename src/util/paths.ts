import { homedir } from 'node:os';
import { join } from 'node:path';

type Env = Readonly<Record<string, string | undefined>>;

// The embedded run log's file name inside the state directory.
export const SQLITE_FILE = 'cronguard.db';

export function isRoot(): boolean {
  return process.geteuid?.() === 0;
}

// Default lock directory: shared system location for root, a private per-user one otherwise.
export function defaultLockDir(env: Env, root: boolean): string {
  if (root) return '/run/lock/cronguard';
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, 'cronguard');
  return join(env.HOME || homedir(), '.cache', 'cronguard', 'locks');
}

// Default directory of the embedded run log, following the XDG base-directory spec.
export function defaultStateDir(env: Env, root: boolean): string {
  if (root) return '/var/lib/cronguard';
  if (env.XDG_STATE_HOME) return join(env.XDG_STATE_HOME, 'cronguard');
  return join(env.HOME || homedir(), '.local', 'state', 'cronguard');
}

// The lock directory: flag, then $CRONGUARD_LOCK_DIR, then the default; `isDefault` tells
// whether it is the (possibly private) default location.
export function resolveLockDir(flag: string | undefined, env: Env, root: boolean): { dir: string; isDefault: boolean } {
  const explicit = flag ?? (env.CRONGUARD_LOCK_DIR || undefined);
  return { dir: explicit ?? defaultLockDir(env, root), isDefault: explicit === undefined };
}

// The run log's directory: flag, then $CRONGUARD_STATE_DIR, then the default.
export function resolveStateDir(flag: string | undefined, env: Env, root: boolean): string {
  return flag ?? (env.CRONGUARD_STATE_DIR || defaultStateDir(env, root));
}
