import { statSync } from 'node:fs';
import { join } from 'node:path';
import { CronguardError, describe, PermissionError, UnavailableError } from '../errors.js';
import { EMBEDDED_LOG_FILE } from '../util/paths.js';
import type { DatabaseConfig } from './database-config.js';
import { dialectOf } from './dialects.js';
import { openSqliteStore } from './index.js';
import type { RunStore } from './run-store.js';

// Where the run log of a subcommand or the web page is: the fleet's database when one is
// configured, else the embedded log in the state dir.
export class LogPlace {
  constructor(
    readonly db: DatabaseConfig | null,
    readonly stateDir: string,
  ) {}

  // Opens (creating if needed) the run log, with the contract's exit codes: the shared log
  // when a database is configured, else the embedded one. `readOnly` (serve --read-only)
  // opens the embedded log without writing to it; the shared one then must not be created.
  // `abort` ends connecting to the shared log at once (serve bounds how long a page waits).
  async open(create = true, readOnly = false, applicationName = 'cronguard', abort?: AbortSignal): Promise<RunStore> {
    if (this.db) return dialectOf(this.db).open(this.db, applicationName, create && !readOnly, abort);
    try {
      return await openSqliteStore(this.stateDir, readOnly);
    } catch (error) {
      // Already said in the contract's terms (a directory not shared with this user: 77).
      if (error instanceof CronguardError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EPERM') {
        throw new PermissionError(`permission denied on the run log in ${this.stateDir}`);
      }
      throw new UnavailableError(`cannot open the run log in ${this.stateDir}: ${describe(error)}`);
    }
  }

  // For reading commands: null when nothing was ever recorded in the embedded log, rather
  // than creating an empty database as a side effect of looking.
  async openExisting(): Promise<RunStore | null> {
    if (!this.exists()) return null;
    return this.open(false);
  }

  // Whether there is a log to read: always for the shared one (its server says), for the
  // embedded one once its file exists.
  exists(): boolean {
    return this.db !== null || sqliteExists(join(this.stateDir, EMBEDDED_LOG_FILE));
  }
}

// Whether the embedded log exists; a state dir we may not look into is 77, not "nothing
// recorded".
function sqliteExists(file: string): boolean {
  try {
    statSync(file);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') throw new PermissionError(`permission denied on the run log ${file}`);
    return false;
  }
}
