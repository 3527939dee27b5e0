import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PermissionError, UnavailableError, describe } from '../errors.js';
import { type DbConfig, resolveDb } from '../pg/config.js';
import { openStore } from '../store/index.js';
import type { RunStore } from '../store/types.js';
import { SQLITE_FILE, isRoot, resolveStateDir } from '../util/paths.js';

export interface StoreFlags {
  readonly stateDir?: string;
  readonly db?: string;
  readonly schema?: string;
}

export function dbOf(flags: StoreFlags): DbConfig | null {
  return resolveDb(flags.db, flags.schema, process.env);
}

// Opens (creating if needed) the run log for a subcommand, with the contract's exit codes:
// the shared log when a database is configured, else the embedded one.
export async function openStoreFor(flags: StoreFlags): Promise<RunStore> {
  const db = dbOf(flags);
  if (db) {
    const [{ PgSession }, { PostgresStore }] = await Promise.all([
      import('../pg/session.js'),
      import('../store/postgres.js'),
    ]);
    return new PostgresStore(await PgSession.connect(db, 'cronguard'), db.schema);
  }
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

// For reading commands: null when nothing was ever recorded in the embedded log, rather
// than creating an empty database as a side effect of looking.
export async function openExistingStoreFor(flags: StoreFlags): Promise<RunStore | null> {
  if (!dbOf(flags) && !existsSync(join(stateDirOf(flags), SQLITE_FILE))) return null;
  return openStoreFor(flags);
}

function stateDirOf(flags: StoreFlags): string {
  return resolveStateDir(flags.stateDir, process.env, isRoot());
}
