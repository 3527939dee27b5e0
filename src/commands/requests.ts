import type { Settings } from '../cli/settings.js';
import { NotFoundError, UsageError } from '../errors.js';
import type { RequestRow } from '../store/requests.js';
import type { RunStore } from '../store/types.js';
import { formatDuration, parseDuration } from '../util/duration.js';
import { sleep } from '../util/io.js';
import { validateName } from '../util/name.js';
import { userName } from '../util/user.js';
import { parseAt } from '../util/time.js';
import { parse, positiveInt, StoreChoice, subcommand, withStoreOptions } from './common.js';
import { tableTime } from './format.js';
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
  const log = await store.open();
  try {
    const id = await log.addRequest({ job: name, args: extra, notBefore, requestedBy: by });
    process.stdout.write(`${id}\n`);
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

// Polls the request until it has ended; a run's exit code is the answer.
async function waitFor(log: RunStore, id: number, timeoutMs: number | null): Promise<number> {
  const deadline = timeoutMs === null ? Number.POSITIVE_INFINITY : Date.now() + timeoutMs;
  for (let delay = 50; ; delay = Math.min(delay * 2, 1000)) {
    const row = (await log.getRequest(id)) as RequestRow;
    if (row.status === 'cancelled') throw new NotFoundError(`request ${id} was cancelled`);
    if (row.status === 'succeeded' || row.status === 'failed') {
      const ran = row.run_id === null ? '' : ` by run ${row.run_id} (cronguard logs ${row.run_id})`;
      if (row.status === 'failed') process.stderr.write(`cronguard: request ${id} failed${ran}, exit ${row.exit_code ?? '-'}\n`);
      return row.exit_code ?? (row.status === 'succeeded' ? 0 : 1);
    }
    if (Date.now() + delay > deadline) {
      process.stderr.write(`cronguard: request ${id} is still ${row.status} after ${formatDuration(timeoutMs ?? 0)}; stopped waiting\n`);
      return 124;
    }
    await sleep(delay);
  }
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
  const rows = log ? await log.listRequests(name ?? null, flags.limit).finally(() => log.close()) : [];
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
  } else if (rows.length === 0) {
    process.stderr.write(`cronguard: no requests${name ? ` for ${name}` : ''}\n`);
  } else {
    const c = colours();
    const cells = rows.map((r) => [
      String(r.id), r.job, r.status, tableTime(r.requested_at), tableTime(r.not_before), r.requested_by ?? '-',
      String(r.run_id ?? '-'), r.exit_code === null ? '-' : String(r.exit_code), r.args.join(' '),
    ]);
    process.stdout.write(renderTable(['ID', 'JOB', 'STATUS', 'REQUESTED', 'NOT BEFORE', 'BY', 'RUN', 'EXIT', 'ARGS'], cells, c));
  }
  return 0;
}

function requestId(text: string): number {
  if (!/^\d{1,15}$/.test(text)) throw new UsageError(`--cancel: '${text}' is not a request id`);
  return Number(text);
}
