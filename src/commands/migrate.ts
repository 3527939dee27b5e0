import type { Settings } from '../cli/settings.js';
import { UsageError } from '../errors.js';
import { dialectOf } from '../store/dialects.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

// `cronguard migrate [--group G]`: create or upgrade the run-log schema (runs also do it on
// first use); with --group, let G write requests into it: the embedded log's directory and
// files become group G's (see store/sqlite/share.ts), a shared log grants G what a web
// application needs to queue requests and follow them (PostgreSQL: a role; MySQL and
// MariaDB: a user or role, `user@host` for a user of one host).
export async function migrate(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('migrate', 'create or upgrade the run-log schema'))
    .option('--group <group>', 'let this group (SQLite: a Unix group; PostgreSQL: a role; MySQL: a user or role) write requests and read the log');
  parse(program, args);
  const group = program.opts<{ group?: string }>().group;
  if (group === '') throw new UsageError('--group needs a group name');
  const choice = new StoreChoice(program.opts(), settings);
  if (group !== undefined && choice.db) {
    const store = await dialectOf(choice.db).open(choice.db, 'cronguard', true);
    try {
      report(await store.migrate());
      process.stdout.write(`${await store.allowRequests(group)}\n`);
    } finally {
      await store.close();
    }
    return 0;
  }
  if (group !== undefined) (await import('../store/sqlite/share.js')).shareStateDir(choice.stateDir, group);
  const store = await choice.open();
  try {
    report(await store.migrate());
  } finally {
    await store.close();
  }
  if (group !== undefined) process.stdout.write(`group ${group} may write requests and schedules and read the run log in ${choice.stateDir}\n`);
  return 0;
}

function report(version: number): void {
  process.stdout.write(`run log schema at version ${version}\n`);
}
