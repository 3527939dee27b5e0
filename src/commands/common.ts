import { statSync } from 'node:fs';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import type { Settings } from '../cli/settings.js';
import { CronguardError, describe, HelpShown, PermissionError, UnavailableError, UsageError } from '../errors.js';
import { type DatabaseConfig, resolveDatabase } from '../store/database-config.js';
import { dialectOf } from '../store/dialects.js';
import { openSqliteStore } from '../store/index.js';
import type { RunStore } from '../store/run-store.js';
import { isRoot, resolveStateDir, SQLITE_FILE } from '../util/paths.js';

// A commander program for one subcommand, set up so that its mistakes become UsageError
// (exit 64) at the CLI boundary instead of commander printing and exiting on its own.
export function subcommand(name: string, description: string): Command {
  const program = new Command(`cronguard ${name}`)
    .description(description)
    .exitOverride()
    .configureOutput({ writeErr: () => {}, outputError: () => {} })
    .helpOption('-h, --help', 'show this help');
  return program;
}

// Parses args, turning commander's own errors into UsageError; help exits 0 via `HelpShown`.
export function parse(program: Command, args: readonly string[]): void {
  try {
    program.parse([...args], { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) throw new HelpShown();
      throw new UsageError(error.message.replace(/^error: /, ''), program.name());
    }
    throw error;
  }
}

// Options that choose the run log, shared by every subcommand that reads it.
export function withStoreOptions(program: Command): Command {
  return program
    .option('--db <url>', 'shared run log ($CRONGUARD_DATABASE_URL): a PostgreSQL URL or libpq keyword=value pairs, or mysql://USER@HOST[:PORT]')
    .option('--schema <name>', 'its schema, MySQL: its database ($CRONGUARD_SCHEMA, default cronguard)')
    .option('--state-dir <dir>', 'where the embedded run log lives ($CRONGUARD_STATE_DIR)');
}

export function positiveInt(option: string, max = 1_000_000) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > max) {
      throw new UsageError(`${option}: '${value}' is not a whole number from 1 to ${max}`);
    }
    return Number(value);
  };
}

export interface StoreFlags {
  readonly stateDir?: string;
  readonly db?: string;
  readonly schema?: string;
}

// Where a subcommand finds the run log: its flags over the settings every invocation reads.
export class StoreChoice {
  readonly db: DatabaseConfig | null;
  readonly stateDir: string;

  constructor(
    flags: StoreFlags,
    readonly settings: Settings,
  ) {
    this.db = resolveDatabase(
      settings.get('database_url', { value: flags.db, name: '--db' }),
      settings.get('schema', { value: flags.schema, name: '--schema' }),
      process.env,
    );
    const dir = resolveStateDir(settings.get('state_dir', { value: flags.stateDir, name: '--state-dir' }), process.env, isRoot());
    if (dir.dir === '') throw new UsageError('--state-dir: the state directory must not be empty');
    this.stateDir = dir.dir;
  }

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
    return this.db !== null || sqliteExists(join(this.stateDir, SQLITE_FILE));
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
