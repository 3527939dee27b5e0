import type { Settings } from '../cli/settings.js';
import { NotFoundError, UsageError } from '../errors.js';
import { printable, tableTime, zoneName } from '../present/format.js';
import { argumentFits, argumentRoom, execBytes, MAX_ARG_BYTES } from '../run/supervisor/arg-limits.js';
import type { RequestRow } from '../store/requests.js';
import type { RunStore } from '../store/run-store.js';
import { parseDuration } from '../util/duration.js';
import { validateName } from '../util/name.js';
import { parseAt } from '../util/time.js';
import { userName } from '../util/user.js';
import { parse, positiveInt, StoreChoice, subcommand, withStoreOptions } from './common.js';
import { waitFor } from './request-wait.js';
import { colours, renderTable } from './table.js';

interface RequestFlags {
  at?: string;
  by?: string;
  wait?: boolean;
  timeout?: string;
  cancel?: string;
}

// `cronguard request NAME [-- args...]`: asks for a run as soon as possible (or --at TIME),
// prints the request's id; --wait waits for the run that serves it and exits with its code.
// `cronguard request --cancel ID` withdraws a request that is still pending.
export async function request(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('request', 'ask for a run now, or at a time'))
    .argument('[name]', 'the job')
    .argument('[args...]', 'arguments for the run (after --), for --batch jobs')
    .option('--at <time>', 'not before TIME: now, +10m, 03:00, tomorrow 03:00, 2026-12-01 03:00')
    .option('--by <who>', 'who asks (default: this user)')
    .option('--wait', "wait for the run that serves it, and exit with that run's exit code")
    .option('--timeout <duration>', 'with --wait: give up after DURATION (exit 124)')
    .option('--cancel <id>', 'withdraw a pending request');
  parse(program, args);
  const flags = program.opts<RequestFlags>();
  const [name, extra] = [program.args[0], program.args.slice(1)];
  if (flags.timeout !== undefined && !flags.wait) throw new UsageError('--timeout applies with --wait');
  const timeoutMs = flags.timeout === undefined ? null : parseDuration(flags.timeout, '--timeout');
  const store = new StoreChoice(program.opts(), settings);
  if (flags.cancel !== undefined) {
    if (name !== undefined || flags.at || flags.wait) throw new UsageError('--cancel takes a request id and nothing else');
    const id = requestId(flags.cancel);
    return cancel(await store.open(), id);
  }
  if (name === undefined) throw new UsageError('which job? cronguard request NAME');
  validateName(name);
  const notBefore = flags.at === undefined ? new Date() : parseAt(flags.at);
  const by = flags.by ?? userName();
  if (by.length > 200) throw new UsageError('--by: at most 200 characters');
  fitsACommandLine(extra);
  const log = await store.open();
  try {
    const id = await log.addRequest({ job: name, args: extra, notBefore, requestedBy: by });
    process.stdout.write(`${id}\n`);
    // A person at a terminal who mistyped the name is told; a script gets the id alone.
    if (process.stderr.isTTY && (await neverRan(log, name))) {
      process.stderr.write(`cronguard: no run of ${name} is in the run log yet; the request waits for one (is the name right?)\n`);
    }
    if (!flags.wait) return 0;
    return await waitFor(log, id, timeoutMs);
  } finally {
    await log.close();
  }
}

async function cancel(log: RunStore, id: number): Promise<number> {
  try {
    const outcome = await log.cancelRequest(id);
    if (!outcome.cancelled && outcome.status === 'missing') throw new NotFoundError(`no request with id ${id}`);
    if (!outcome.cancelled) throw new UsageError(`request ${id} is ${outcome.status}; only a pending request can be cancelled`);
    process.stderr.write(`cronguard: request ${id} cancelled\n`);
    return 0;
  } finally {
    await log.close();
  }
}

// Arguments that no command line could take are refused now, not at the run (see arg-limits).
function fitsACommandLine(args: readonly string[]): void {
  const long = args.findIndex((arg) => !argumentFits(arg));
  if (long >= 0) throw new UsageError(`argument ${long + 1} is ${Buffer.byteLength(args[long] as string)} bytes; a command line takes at most ${MAX_ARG_BYTES - 1} bytes in one argument`);
  const room = argumentRoom([], {});
  if (execBytes(args) > room) throw new UsageError(`the arguments take ${execBytes(args)} bytes; a command line here takes at most ${room} in all`);
}

async function neverRan(log: RunStore, name: string): Promise<boolean> {
  const [job] = await log.jobStatus(name);
  return !job || (job.last_run_id === null && job.running_run_id === null);
}

// `cronguard requests [NAME]`: pending and recent requests, newest first.
export async function requests(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('requests', 'pending and recent requests'))
    .argument('[name]', 'only this job')
    .option('--limit <n>', 'how many to show', positiveInt('--limit'), 20)
    .option('--json', 'print one JSON array of request rows');
  parse(program, args);
  const flags = program.opts<{ limit: number; json?: boolean }>();
  const name = program.args[0];
  if (name !== undefined) validateName(name);
  const log = await new StoreChoice(program.opts(), settings).openExisting();
  let rows: RequestRow[] = [];
  // Pending requests of a job whose shared lock another job holds now wait for that one.
  const held = new Map<string, string>();
  if (log) {
    try {
      rows = await log.listRequests(name ?? null, flags.limit);
      if (!flags.json && rows.some((r) => r.status === 'pending')) {
        for (const j of await log.jobStatus(name ?? null)) if (j.lock_held_by !== null) held.set(j.job, j.lock_held_by);
      }
    } finally {
      await log.close();
    }
  }
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
  } else if (rows.length === 0) {
    process.stderr.write(`cronguard: no requests${name ? ` for ${name}` : ''}\n`);
  } else {
    const c = colours();
    const cells = rows.map((r) => [
      String(r.id), printable(r.job), r.status === 'pending' && held.has(r.job) ? printable(`pending, lock: ${held.get(r.job)}`) : r.status, tableTime(r.requested_at), tableTime(r.not_before), printable(r.requested_by ?? '-'),
      String(r.run_id ?? '-'), r.exit_code === null ? '-' : String(r.exit_code), r.args.map(shownArg).join(' '),
    ]);
    process.stdout.write(renderTable(['ID', 'JOB', 'STATUS', `REQUESTED (${zoneName()})`, 'NOT BEFORE', 'BY', 'RUN', 'EXIT', 'ARGS'], cells, c));
  }
  return 0;
}

// An argument as the table shows it; one that is not a string (a NULL in a PostgreSQL row
// written before the constraint) as JSON.
function shownArg(arg: unknown): string {
  return printable(typeof arg === 'string' ? arg : JSON.stringify(arg));
}

function requestId(text: string): number {
  if (!/^\d{1,15}$/.test(text)) throw new UsageError(`--cancel: '${text}' is not a request id`);
  return Number(text);
}
