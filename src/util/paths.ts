import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Setting } from './setting.js';
import { joinsShared, SHARED_LOCK_DIR, SHARED_STATE_DIR } from './sharing.js';

type Env = Readonly<Record<string, string | undefined>>;

// The embedded run log's file name inside the state directory.
export const EMBEDDED_LOG_FILE = 'cronguard.db';

export function isRoot(): boolean {
  return process.geteuid?.() === 0;
}

// Default lock directory: root's, shared with the members of the cronguard group; a private
// per-user one for everyone else.
export function defaultLockDir(env: Env, root: boolean): string {
  if (root || joinsShared(SHARED_LOCK_DIR)) return SHARED_LOCK_DIR;
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, 'cronguard');
  return join(env.HOME || homedir(), '.cache', 'cronguard', 'locks');
}

// Default directory of the embedded run log: root's, shared like the lock directory; else
// the XDG base-directory spec's.
export function defaultStateDir(env: Env, root: boolean): string {
  if (root || joinsShared(SHARED_STATE_DIR)) return SHARED_STATE_DIR;
  if (env.XDG_STATE_HOME) return join(env.XDG_STATE_HOME, 'cronguard');
  return join(env.HOME || homedir(), '.local', 'state', 'cronguard');
}

export interface ResolvedDir {
  readonly dir: string;
  // The (possibly private, per-user) default location rather than one the user chose.
  readonly isDefault: boolean;
  readonly from: string;
}

// The lock directory: the chosen setting (flag, variable or file), else the default.
export function resolveLockDir(setting: Setting | undefined, env: Env, root: boolean): ResolvedDir {
  return setting
    ? { dir: setting.value, isDefault: false, from: setting.from }
    : { dir: defaultLockDir(env, root), isDefault: true, from: 'default' };
}

// The run log's directory: the chosen setting, else the default.
export function resolveStateDir(setting: Setting | undefined, env: Env, root: boolean): ResolvedDir {
  return setting
    ? { dir: setting.value, isDefault: false, from: setting.from }
    : { dir: defaultStateDir(env, root), isDefault: true, from: 'default' };
}
