import { Command, CommanderError } from 'commander';
import type { Settings } from '../cli/settings.js';
import { HelpShown, UsageError } from '../errors.js';
import { resolveDatabase } from '../store/database-config.js';
import { LogPlace } from '../store/log-place.js';
import { isRoot, resolveStateDir } from '../util/paths.js';

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
export class StoreChoice extends LogPlace {
  constructor(
    flags: StoreFlags,
    readonly settings: Settings,
  ) {
    const db = resolveDatabase(
      settings.get('database_url', { value: flags.db, name: '--db' }),
      settings.get('schema', { value: flags.schema, name: '--schema' }),
      process.env,
    );
    const dir = resolveStateDir(settings.get('state_dir', { value: flags.stateDir, name: '--state-dir' }), process.env, isRoot());
    if (dir.dir === '') throw new UsageError('--state-dir: the state directory must not be empty');
    super(db, dir.dir);
  }
}
