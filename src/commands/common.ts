import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { describe, HelpShown, PermissionError, UnavailableError, UsageError } from '../errors.js';
import { type DbConfig, resolveDb } from '../pg/config.js';
import { connectPostgres, openPostgresStore, openSqliteStore } from '../store/index.js';
import type { RunStore } from '../store/types.js';
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
      throw new UsageError(`${program.name()}: ${error.message.replace(/^error: /, '')}`);
    }
    throw error;
  }
}

// Options that choose the run log, shared by every subcommand that reads it.
export function withStoreOptions(program: Command): Command {
  return program
    .option('--db <url>', 'PostgreSQL run log ($CRONGUARD_DATABASE_URL, PG* variables)')
    .option('--schema <name>', 'its schema ($CRONGUARD_SCHEMA, default cronguard)')
    .option('--state-dir <dir>', 'where the embedded run log lives ($CRONGUARD_STATE_DIR)');
}

export function positiveInt(option: string) {
  return (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < 1) {
      throw new UsageError(`${option}: '${value}' is not a positive whole number`);
    }
    return Number(value);
  };
}

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
  if (db) return openPostgresStore(await connectPostgres(db, 'cronguard'), db.schema);
  const dir = stateDirOf(flags);
  try {
    return await openSqliteStore(dir);
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
