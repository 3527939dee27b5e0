import type { ChalkInstance } from 'chalk';
import type { Settings } from '../cli/settings.js';
import { NotFoundError } from '../errors.js';
import { age, ago, clip, clockTime, duration, percent, printable, sparkline, tableTime, terminalWidth, zoneName } from '../present/format.js';
import { type JobSchedule, jobSchedule, withScheduleProblem } from '../schedule/job.js';
import { blockedSince, failedTargets, finalRuns, isFailing, type JobStatus, PAUSE_EVENTS_SHOWN, type Paused, type PauseEvent } from '../store/jobs.js';
import { type LeasedJobStatus, leaseText, withLeases } from '../store/leases.js';
import type { RunStore } from '../store/run-store.js';
import { type SlottedJobStatus, slotsText, withSlots } from '../store/slot-holders.js';
import { validateName } from '../util/name.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';
import { colours, paintStatus, renderTable } from './table.js';

// `cronguard status [NAME]`: every job at a glance, one line each; for one job, all there
// is to know about it; `--json` for programs (times in UTC).
export async function status(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('status', 'each job: state, last result, recent runs, requests'))
    .argument('[name]', 'only this job, in detail')
    .option('--json', 'print one JSON array, an object per job');
  parse(program, args);
  const name = program.args[0];
  if (name !== undefined) validateName(name);
  const log = await new StoreChoice(program.opts(), settings).openExisting();
  const found = log ? await read(log, name ?? null).finally(() => log.close()) : { jobs: [], fleet: null, events: [] };
  const { jobs, fleet, events } = found;
  if (name !== undefined && jobs.length === 0) throw new NotFoundError(`no job ${name} in the run log`);
  const c = colours();
  // One job's object carries its pauses and resumes (and the fleet's) too.
  if (program.opts<{ json?: boolean }>().json) {
    const read = withScheduleProblem(jobs, Date.now());
    const shown = name === undefined ? read : read.map((j) => ({ ...j, pause_events: events }));
    process.stdout.write(`${JSON.stringify(shown, null, 2)}\n`);
    return 0;
  }
  // The fleet's pause first: every job skips, whatever its line says.
  if (fleet) process.stdout.write(fleetLine(fleet, c));
  if (jobs.length === 0) process.stderr.write('cronguard: no jobs recorded\n');
  else if (name !== undefined) process.stdout.write(detail(jobs[0] as LeasedJobStatus & SlottedJobStatus, c, events));
  else process.stdout.write(overview(jobs, c));
  return 0;
}

// The fleet's pause, in local time: since when, by whom, until when, why.
function fleetLine(p: Paused, c: ChalkInstance): string {
  const until = p.until ? ` until ${tableTime(p.until)}` : '';
  const what = printable(`since ${tableTime(p.since)}${p.by ? ` by ${p.by}` : ''}${until}${p.reason ? `: ${p.reason}` : ''}`);
  return `${c.yellow.bold('FLEET PAUSED')} ${what} ${c.dim('(cronguard enable --all resumes it)')}\n`;
}

async function read(log: RunStore, name: string | null): Promise<{ jobs: (LeasedJobStatus & SlottedJobStatus)[]; fleet: Paused | null; events: PauseEvent[] }> {
  const jobs = await withSlots(log, await withLeases(log, await log.jobStatus(name)));
  const fleet = await log.fleetPause();
  const events = name === null || jobs.length === 0 ? [] : await log.pauseEvents(name, PAUSE_EVENTS_SHOWN);
  return { jobs, fleet, events };
}

const SPARK = 12;

// One line per job. Columns go, least useful first, until the table fits the terminal.
function overview(jobs: readonly SlottedJobStatus[], c: ChalkInstance): string {
  const now = Date.now();
  const headers = ['JOB', 'STATE', 'LAST', 'AGO', 'OK AGO', 'OK%', 'MEDIAN', 'P95', 'SKIPS', 'NEXT', 'RECENT', 'REQ'];
  const rows = jobs.map((j) => [
    printable(j.job),
    state(j, c, now),
    j.last_status === null ? '-' : `${paintStatus(c, j.last_status)}${j.last_status === 'succeeded' || j.last_exit_code === null ? '' : ` ${j.last_exit_code}`}`,
    age(j.last_started_at, now),
    stale(j, c, now),
    percent(j.success_rate),
    duration(j.duration_median_ms),
    duration(j.duration_p95_ms),
    String(j.last_overlaps ?? 0),
    j.next_due_at === null ? '-' : ago(j.next_due_at, now),
    sparkline(j.recent, SPARK, c),
    String(j.pending_requests),
  ]);
  const idx = (h: string) => headers.indexOf(h);
  const unused = (h: string, empty: string) => rows.every((r) => r[idx(h)] === empty);
  const drop = [idx('P95'), idx('SKIPS'), idx('NEXT'), idx('MEDIAN'), idx('OK%'), idx('AGO'), idx('REQ')];
  const always = [...(unused('SKIPS', '0') ? [idx('SKIPS')] : []), ...(unused('NEXT', '-') ? [idx('NEXT')] : []), ...(unused('REQ', '0') ? [idx('REQ')] : [])];
  return renderTable(headers, rows, c, { hide: always, width: terminalWidth(), drop, shrink: idx('JOB') });
}

function state(j: SlottedJobStatus, c: ChalkInstance, now: number): string {
  // Copies in several slots of its lock (--max-running): how many of how many (status NAME says whose).
  if (j.state === 'running' && j.slots) return c.cyan(slotsText(j.slots));
  if (j.state === 'running') return c.cyan(`running ${age(j.running_since, now)}`);
  if (j.state === 'disabled') return c.yellow(clip(printable(`paused${j.disabled_fleet_wide ? ' (fleet)' : ''}${j.disabled_reason ? `: ${j.disabled_reason}` : ''}`), 24));
  // A loop (--for) between its runs holds the lock: an application's try of it reads busy.
  if (j.holding) return `idle, holding until ${clockTime(j.holding.until)}`;
  // Idle because another job runs under its shared lock (--lock-file, --lock-key).
  return j.lock_held_by === null ? 'idle' : clip(printable(`idle, lock: ${j.lock_held_by}`), 24);
}

// The last success's age, red when the last run did not succeed (the job needs a look).
function stale(j: JobStatus, c: ChalkInstance, now: number): string {
  const text = j.last_success_at === null ? 'never' : age(j.last_success_at, now);
  return isFailing(j) ? c.red(text) : text;
}

// Everything about one job, a field per line.
function detail(j: LeasedJobStatus & SlottedJobStatus, c: ChalkInstance, events: readonly PauseEvent[]): string {
  const now = Date.now();
  const when = (iso: string | null) => (iso === null ? '-' : `${tableTime(iso)} (${ago(iso, now)})`);
  const width = terminalWidth();
  const counts = Object.entries(j.runs_total).map(([s, n]) => `${n} ${s}`).join(', ');
  const lines: [string, string | null][] = [
    ['state', `${state(j, c, now)}${j.state === 'running' && !j.slots ? ` on ${printable(j.running_host ?? '?')} (pid ${j.running_pid}, run ${j.running_run_id}, since ${when(j.running_since)})` : ''}`],
    // Who holds each slot, where several copies may run: a line per slot held.
    ...(j.state === 'running' && j.slots ? j.slots.running : []).map((h): [string, string] => [`slot ${h.slot}`, `on ${printable(h.host)} (pid ${h.pid}, run ${h.run_id}, since ${when(h.since)})`]),
    ['lease', j.lease === null ? null : printable(`held by ${leaseText(j.lease)}, since ${when(j.lease.since)}`)],
    ['holding', j.holding === null || j.state !== 'idle' ? null : printable(`${j.holding.lock}${j.holding.key ? ` ${j.holding.key}` : ''} by a loop on ${j.holding.host} (pid ${j.holding.pid}) between its runs, until ${when(j.holding.until)}`)],
    ['shared lock', j.lock_held_by === null || j.state === 'running' ? null : printable(`held by ${j.lock_held_by}, which runs now`)],
    ['paused', j.state === 'disabled' ? printable(`${j.disabled_fleet_wide ? 'fleet-wide, ' : ''}since ${when(j.disabled_since)}${j.disabled_by ? ` by ${j.disabled_by}` : ''}${j.disabled_until ? `, until ${when(j.disabled_until)}` : ''}${j.disabled_reason ? `: ${j.disabled_reason}` : ''}`) : null],
    ['blocked', blockedSince(j) === null ? null : c.yellow(printable(`skipped ${when(j.blocked_at)}: its lock was held by ${j.blocked_by}, who does not share the job`))],
    ['command', j.command === null ? null : clip(printable(j.command), Math.max(20, width - 15))],
    ['host', j.host === null ? null : `${printable(j.host)}, last seen ${when(j.last_seen_at)}`],
    ['last run', j.last_run_id === null ? 'none finished' : `run ${j.last_run_id}: ${paintStatus(c, j.last_status as string)}${j.last_status === 'succeeded' || j.last_exit_code === null ? '' : ` (exit ${j.last_exit_code})`} in ${duration(j.last_duration_ms)}`],
    ['', j.last_run_id === null ? null : `${when(j.last_started_at)}${j.last_overlaps ? `, ${j.last_overlaps} skipped` : ''}`],
    ['failing', j.failed_requests.length === 0 ? null : c.red(printable(failedTargets(j)))],
    ['last success', j.last_success_run_id === null ? c.red('never') : `run ${j.last_success_run_id} in ${duration(j.last_success_duration_ms)}`],
    ['', j.last_success_run_id === null ? null : when(j.last_success_at)],
    ['recent', j.recent.length === 0 ? null : `${sparkline(j.recent, Math.min(50, width - 16), c)}`],
    ['', j.recent.length === 0 ? null : `${percent(j.success_rate)} of the last ${finalRuns(j.recent).length} succeeded; median ${duration(j.duration_median_ms)}, p95 ${duration(j.duration_p95_ms)}`],
    ['schedule', j.schedule === null ? null : scheduleLine(j, now, when)],
    ['next due', j.next_due_at === null ? null : `${when(j.next_due_at)} (--min-interval ${duration(j.min_interval_ms)})`],
    ['requests', `${j.pending_requests} pending`],
    ['runs', counts || null],
    ...events.map((e, i): [string, string] => [i === 0 ? 'pause log' : '', pauseEventLine(e, when)]),
  ];
  const shown = lines.filter((l): l is [string, string] => l[1] !== null);
  return `${c.bold(printable(j.job))}  ${c.dim(`(times in ${zoneName()})`)}\n${shown.map(([k, v]) => `  ${k.padEnd(13)}${v}`).join('\n')}\n`;
}

// The stored schedule, and when it is next due after the job's last start (or since when it
// is due); a schedule written by hand that cannot be read says why.
function scheduleLine(j: JobStatus, now: number, when: (iso: string) => string): string {
  const s = jobSchedule(j, now) as JobSchedule;
  if (s.due === null) return `${printable(s.text)} (cannot be read: ${printable(s.problem ?? '')})`;
  return `${printable(s.text)} (${s.due.due ? 'due since' : 'next'} ${when(s.due.at.toISOString())})`;
}

// One pause or resume, newest first: when, what, whose, until when, why.
function pauseEventLine(e: PauseEvent, when: (iso: string | null) => string): string {
  const what = `${e.action === 'pause' ? 'paused' : 'resumed'}${e.fleet_wide ? ' fleet-wide' : ''}`;
  return printable(`${when(e.at)} ${what} by ${e.by}${e.until ? `, until ${when(e.until)}` : ''}${e.reason ? `: ${e.reason}` : ''}`);
}
