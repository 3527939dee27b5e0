import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PermissionError, UnavailableError, describe } from '../errors.js';
import { openStore } from '../store/index.js';
import { SQLITE_FILE } from '../store/sqlite.js';
import type { RunStore } from '../store/types.js';
import { isRoot, resolveStateDir } from '../util/paths.js';

export interface StoreFlags {
  readonly stateDir?: string;
}

// Opens (creating if needed) the run log for a subcommand, with the contract's exit codes.
export async function openStoreFor(flags: StoreFlags): Promise<RunStore> {
  const dir = stateDirOf(flags);
  try {
    return await openStore(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') {
      throw new PermissionError(`permission denied on the run log in ${dir}`);
    }
    throw new UnavailableError(`cannot open the run log in ${dir}: ${describe(error)}`);
  }
}

// For reading commands: null when nothing was ever recorded, rather than creating an empty
// database as a side effect of looking.
export async function openExistingStoreFor(flags: StoreFlags): Promise<RunStore | null> {
  return existsSync(join(stateDirOf(flags), SQLITE_FILE)) ? openStoreFor(flags) : null;
}

function stateDirOf(flags: StoreFlags): string {
  return resolveStateDir(flags.stateDir, process.env, isRoot());
}
