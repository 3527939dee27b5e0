import { Command, CommanderError } from 'commander';
import { HelpShown, UsageError } from '../errors.js';

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
