import type { Settings } from '../cli/settings.js';
import { UsageError } from '../errors.js';
import { RUN_STATUSES, type RunStatus } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import { validateName } from '../util/name.js';
import { parse, positiveInt, StoreChoice, subcommand, withStoreOptions } from './common.js';
import { colours, RUN_HEADERS, renderTable, runCells } from './table.js';

interface Flags {
  limit: number;
  status?: string;
  json?: boolean;
  stateDir?: string;
}

// `cronguard history [NAME]`: recent runs, newest first, as a table or JSON.
export async function history(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('history', 'recent runs, newest first'))
    .argument('[name]', 'only this job')
    .option('--limit <n>', 'how many runs to show', positiveInt('--limit'), 20)
    .option('--status <status>', `only runs with this status (${RUN_STATUSES.join(', ')})`)
    .option('--json', 'print one JSON array of run rows');
  parse(program, args);
  const flags = program.opts<Flags>();
  const name = program.args[0];
  if (name !== undefined) validateName(name);
  if (flags.status !== undefined && !RUN_STATUSES.includes(flags.status as RunStatus)) {
    throw new UsageError(`--status: unknown status '${flags.status}' (use ${RUN_STATUSES.join(', ')})`);
  }
  const store = await new StoreChoice(flags, settings).openExisting();
  const runs = store
    ? await store.listRuns({ job: name, status: flags.status as RunStatus | undefined, limit: flags.limit })
    : [];
  await store?.close();
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(runs, null, 2)}\n`);
  } else if (runs.length === 0) {
    process.stderr.write(`cronguard: no runs recorded${name ? ` for ${name}` : ''}\n`);
  } else {
    const c = colours();
    process.stdout.write(renderTable(RUN_HEADERS, runs.map((r) => runCells(r, c, formatDuration)), c));
  }
  return 0;
}

// `cronguard migrate`: create or upgrade the run-log schema (runs also do it on first use).
export async function migrate(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('migrate', 'create or upgrade the run-log schema'));
  parse(program, args);
  const store = await new StoreChoice(program.opts(), settings).open();
  const version = await store.migrate();
  await store.close();
  process.stdout.write(`run log schema at version ${version}\n`);
  return 0;
}
