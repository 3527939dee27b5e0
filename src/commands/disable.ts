import { hostname } from 'node:os';
import type { Command } from 'commander';
import type { Settings } from '../cli/settings.js';
import { NotFoundError, UsageError } from '../errors.js';
import { type Paused, resumeHint } from '../store/jobs.js';
import type { RunStore } from '../store/run-store.js';
import { parseDuration } from '../util/duration.js';
import { validateName } from '../util/name.js';
import { PAST_HINT, parseAt } from '../util/time.js';
import { userName } from '../util/user.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';
import { drain } from './drain.js';

interface DisableFlags {
  all?: boolean;
  reason?: string;
  by?: string;
  until?: string;
  drain?: string;
}

// `cronguard disable NAME|--all [--until TIME] [--reason TEXT] [--drain D]`: pauses a job, or
// every job of the log (maintenance). Their invocations exit 0 without running, and their
// requests wait, until `cronguard enable` (the same NAME, or --all) or TIME. --drain then
// waits until no run of what was paused is active.
export async function disable(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('disable', 'pause a job, or every job (--all), until enable or --until'))
    .argument('[name]', 'the job')
    .option('--all', 'pause every job of the run log, those not seen yet too (maintenance)')
    .option('--until <time>', 'resume by itself at TIME: +2h, 03:00, tomorrow 03:00, 2026-12-01 03:00 or an ISO time')
    .option('--reason <text>', 'why, shown by status, check and -v')
    .option('--drain <duration>', `then wait up to DURATION until no run is active; still some: each named, exit ${DRAIN_EXIT}`)
    .option('--by <who>', 'who paused it (default: user@host)');
  parse(program, args);
  const flags = program.opts<DisableFlags>();
  const name = target(program, flags.all === true, 'disable');
  if ((flags.reason?.length ?? 0) > 1000) throw new UsageError('--reason: at most 1000 characters');
  const now = new Date();
  const until = flags.until === undefined ? null : untilOf(flags.until, now);
  const drainMs = flags.drain === undefined ? null : parseDuration(flags.drain, '--drain');
  const by = who(flags.by);
  const paused: Paused = { reason: flags.reason ?? null, since: now.toISOString(), by, until: until?.toISOString() ?? null };
  const store = new StoreChoice(program.opts(), settings);
  const log = await store.open();
  try {
    const resume = resumeHint(name ?? '', { ...paused, fleet: name === null });
    if (name === null) {
      await log.setFleetPause(paused, by, paused.since as string);
      process.stderr.write(`cronguard: every job paused fleet-wide (${resume})\n`);
    } else {
      await log.setPaused(name, paused, by, paused.since as string);
      process.stderr.write(`cronguard: ${name} paused (${resume})\n`);
    }
    return drainMs === null ? 0 : await drain(log, () => store.open(), name, drainMs, DRAIN_EXIT);
  } finally {
    // After a drain that lost the connection, closing it may fail too: nothing to say.
    await log.close().catch(() => undefined);
  }
}

// With --drain, runs still active when DURATION ran out: exit 124, as timeout(1) and
// `request --wait --timeout`; the pause holds all the same.
const DRAIN_EXIT = 124;

// `cronguard enable NAME|--all`: resumes a paused job, or the fleet; jobs paused on their own
// stay paused when the fleet resumes. Waiting requests run at the job's next invocation.
export async function enable(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('enable', 'resume a paused job, or the fleet (--all)'))
    .argument('[name]', 'the job')
    .option('--all', "end the fleet's pause (disable --all); jobs paused on their own stay paused")
    .option('--by <who>', 'who resumed it (default: user@host)');
  parse(program, args);
  const flags = program.opts<{ all?: boolean; by?: string }>();
  const name = target(program, flags.all === true, 'enable');
  const by = who(flags.by);
  const log = await new StoreChoice(program.opts(), settings).open();
  try {
    return name === null ? await resumeFleet(log, by) : await resumeJob(log, name, by);
  } finally {
    await log.close();
  }
}

async function resumeFleet(log: RunStore, by: string): Promise<number> {
  if (!(await log.setFleetPause(null, by, new Date().toISOString()))) {
    process.stderr.write('cronguard: the fleet was not paused\n');
    return 0;
  }
  const own = (await log.jobStatus(null)).filter((j) => j.state === 'disabled').map((j) => j.job);
  const still = own.length === 0 ? '' : `; paused on their own still: ${own.join(', ')}`;
  process.stderr.write(`cronguard: the fleet resumed${still}\n`);
  return 0;
}

async function resumeJob(log: RunStore, name: string, by: string): Promise<number> {
  // A mistyped name must not read as done.
  const [job] = await log.jobStatus(name);
  if (!job) throw new NotFoundError(`no job ${name} in the run log; nothing to resume`);
  const fleet = job.disabled_fleet_wide ? true : (await log.fleetPause()) !== null;
  const fleetNote = fleet ? '; the fleet is paused (cronguard enable --all resumes it)' : '';
  if (job.state !== 'disabled' || job.disabled_fleet_wide) {
    process.stderr.write(`cronguard: ${name} was not paused${fleet ? ' on its own' : ''}${fleetNote}\n`);
    return 0;
  }
  await log.setPaused(name, null, by, new Date().toISOString());
  process.stderr.write(`cronguard: ${name} resumed${fleetNote}\n`);
  return 0;
}

// NAME or --all, not both, not neither.
function target(program: Command, all: boolean, verb: string): string | null {
  const name = program.args[0];
  if (all && name !== undefined) throw new UsageError(`--all ${verb === 'disable' ? 'pauses' : 'resumes'} the whole fleet; give no NAME with it`);
  if (!all && name === undefined) throw new UsageError(`which job? cronguard ${verb} NAME (or --all for every job)`);
  return all ? null : validateName(name as string);
}

// --until: a time to come, in request --at's forms.
function untilOf(text: string, now: Date): Date {
  const at = parseAt(text, now, '--until');
  if (at.getTime() <= now.getTime()) throw new UsageError(`--until: ${text} is in the past; ${PAST_HINT}`);
  return at;
}

// Who pauses or resumes: --by as given, else user@host.
function who(by: string | undefined): string {
  if (by !== undefined && (by.length === 0 || by.length > 200)) throw new UsageError('--by: from 1 to 200 characters');
  return by ?? `${userName()}@${hostname()}`;
}
