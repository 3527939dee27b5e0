import { parse, subcommand, withStoreOptions } from '../cli/program.js';
import { openStoreFor } from './store.js';

// `cronguard migrate`: create or upgrade the run-log schema (runs also do it on first use).
export async function migrate(args: readonly string[]): Promise<number> {
  const program = withStoreOptions(subcommand('migrate', 'create or upgrade the run-log schema'));
  parse(program, args);
  const store = await openStoreFor(program.opts());
  const version = await store.migrate();
  await store.close();
  process.stdout.write(`run log schema at version ${version}\n`);
  return 0;
}
