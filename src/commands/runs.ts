import type { Settings } from '../cli/settings.js';
import { UsageError } from '../errors.js';
import { MAX_SLOTS } from '../lock/slots.js';
import { terminalWidth, zoneName } from '../present/format.js';
import { RUN_STATUSES, type RunStatus } from '../store/types.js';
import { validateName } from '../util/name.js';
import { parseSince } from '../util/time.js';
import { parse, positiveInt, StoreChoice, subcommand, withStoreOptions } from './common.js';
import { colours, RUN_HEADERS, renderTable, runCells } from './table.js';

interface Flags {
  limit: number;
  status?: string;
  host?: string;
  slot?: number;
  since?: string;
  json?: boolean;
}

// `cronguard history [NAME...]`: recent runs, newest first, as a table (local times, the
// command cut to the terminal's width) or JSON (UTC, every column).
export async function history(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('history', 'recent runs, newest first'))
    .argument('[names...]', 'only these jobs')
    .option('--limit <n>', 'how many runs to show', positiveInt('--limit'), 20)
    .option('--status <status>', `only runs with this status (${RUN_STATUSES.join(', ')})`)
    .option('--since <when>', 'only runs started since: a duration ago (2h, 1d) or a time')
    .option('--host <host>', 'only runs on this host')
    .option('--slot <n>', `only runs that held this slot of their job's lock (--max-running; 0 to ${MAX_SLOTS - 1})`, slotNumber)
    .option('--json', 'print one JSON array of run rows');
  parse(program, args);
  const flags = program.opts<Flags>();
  const names = (program.args as string[]).map(validateName);
  if (flags.status !== undefined && !RUN_STATUSES.includes(flags.status as RunStatus)) {
    throw new UsageError(`--status: unknown status '${flags.status}' (use ${RUN_STATUSES.join(', ')})`);
  }
  if (flags.host !== undefined && (flags.host === '' || flags.host.length > 255)) throw new UsageError('--host: give a host name');
  const since = flags.since === undefined ? undefined : parseSince(flags.since, '--since').toISOString();
  const store = await new StoreChoice(program.opts(), settings).openExisting();
  const filter = { jobs: names, status: flags.status as RunStatus | undefined, host: flags.host, slot: flags.slot, since, limit: flags.limit, withOutput: flags.json };
  const runs = store ? await store.listRuns(filter).finally(() => store.close()) : [];
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(runs, null, 2)}\n`);
  } else if (runs.length === 0) {
    process.stderr.write(`cronguard: no runs recorded${names.length ? ` for ${names.join(', ')}` : ''}${since || flags.host || flags.status || flags.slot !== undefined ? ' that match' : ''}\n`);
  } else {
    const c = colours();
    const now = Date.now();
    const headers = RUN_HEADERS.map((h) => (h === 'STARTED' ? `STARTED (${zoneName()})` : h));
    const command = RUN_HEADERS.indexOf('COMMAND');
    // The slot is worth a column only where a job runs several copies at once.
    const hide = runs.some((r) => (r.max_running ?? 1) > 1) ? [] : [RUN_HEADERS.indexOf('SLOT')];
    // On a terminal the command is cut to fit; piped, it is whole (for grep).
    const fit = process.stdout.isTTY ? { hide, width: terminalWidth(), shrink: command } : { hide, width: Number.POSITIVE_INFINITY };
    process.stdout.write(renderTable(headers, runs.map((r) => runCells(r, c, now)), c, fit));
  }
  return 0;
}

// --slot: a slot of a job's lock, numbered from 0 as $CRONGUARD_SLOT is.
function slotNumber(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) >= MAX_SLOTS) throw new UsageError(`--slot: '${value}' is not a slot number from 0 to ${MAX_SLOTS - 1}`);
  return Number(value);
}
