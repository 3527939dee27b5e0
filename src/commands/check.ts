import type { Settings } from '../cli/settings.js';
import { CronguardError, describe, HelpShown, UsageError } from '../errors.js';
import { printable } from '../present/format.js';
import type { JobSchedule } from '../schedule/job.js';
import { blockedSince, failedTargets, isFailing, type JobStatus } from '../store/jobs.js';
import { storeError } from '../store/store-error.js';
import { formatDuration, parseDuration } from '../util/duration.js';
import { validateName } from '../util/name.js';
import { redact } from '../util/redact.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

// The monitoring-plugin states (Nagios, Icinga, Sensu) and their exit codes.
const STATES = ['OK', 'WARNING', 'CRITICAL', 'UNKNOWN'] as const;
type State = 0 | 1 | 2 | 3;

interface Limits {
  // Without a stored schedule: how old the last success may be. With one: how late after
  // its fire time the job may be.
  maxAgeMs: number | null;
  warnAgeMs: number | null;
  maxDurationMs: number | null;
}

interface Verdict {
  state: State;
  message: string;
  // Performance data: label, value in seconds, warning and critical thresholds.
  perf: [string, number, number | null, number | null][];
}

// `cronguard check NAME --max-age D`: one line a monitoring system reads, and its exit code.
// Whatever goes wrong, bad arguments and an unreachable log included, is UNKNOWN (3), as the
// plugin guidelines ask, rather than an exit code the monitor would not understand.
export async function check(args: readonly string[], settings: Settings): Promise<number> {
  let json = args.includes('--json');
  try {
    const program = withStoreOptions(subcommand('check', 'monitoring-plugin check: has NAME succeeded recently?'))
      .argument('<name>', 'the job')
      .option('--max-age <duration>', 'CRITICAL when the last success is older; with a stored schedule, when the job is this late')
      .option('--warn-age <duration>', 'WARNING when the last success is older (with a stored schedule: this late)')
      .option('--max-duration <duration>', 'CRITICAL when a running run has run longer')
      .option('--json', 'print one JSON object');
    parse(program, args);
    const flags = program.opts<{ maxAge?: string; warnAge?: string; maxDuration?: string; json?: boolean }>();
    json = flags.json === true;
    const name = validateName(program.args[0] as string);
    const limits: Limits = {
      maxAgeMs: flags.maxAge === undefined ? null : parseDuration(flags.maxAge, '--max-age'),
      warnAgeMs: flags.warnAge === undefined ? null : parseDuration(flags.warnAge, '--warn-age'),
      maxDurationMs: flags.maxDuration === undefined ? null : parseDuration(flags.maxDuration, '--max-duration'),
    };
    if (limits.warnAgeMs !== null && limits.maxAgeMs !== null && limits.warnAgeMs >= limits.maxAgeMs) throw new UsageError('--warn-age must be shorter than --max-age');
    const store = await new StoreChoice(program.opts(), settings).openExisting();
    const [job] = store ? await store.jobStatus(name).finally(() => store.close()) : [];
    const now = Date.now();
    // croner only for a job that has a schedule.
    const schedule = job?.schedule != null ? (await import('../schedule/job.js')).jobSchedule(job, now) : null;
    if (limits.maxAgeMs === null && schedule === null) {
      throw new UsageError(`--max-age is needed${job ? `: ${name} has no stored schedule to be late by` : ''} (e.g. --max-age 1h)`);
    }
    return print(name, job ? judge(job, limits, now, schedule) : never(name), json);
  } catch (error) {
    if (error instanceof HelpShown) throw error;
    const known = error instanceof CronguardError ? error : storeError(error);
    return print(null, { state: 3, message: `cronguard check: ${known ? known.message : describe(error)}`, perf: [] }, json);
  }
}

function never(name: string): Verdict {
  return { state: 3, message: `${name} has never run (no such job in the run log)`, perf: [] };
}

// A skip because a user who does not share the job held its lock is at least a WARNING
// until a run starts again: the job did not run, and nothing else would say so.
export function judge(job: JobStatus, limits: Limits, now: number, schedule: JobSchedule | null = null): Verdict {
  const verdict = judgeRuns(job, limits, now, schedule);
  const blocked = blockedSince(job);
  if (blocked === null || job.state === 'disabled') return verdict;
  const why = `did not run ${formatDuration(now - Date.parse(blocked))} ago: its lock was held by ${job.blocked_by}, who does not share the job`;
  if (verdict.state === 1 || verdict.state === 2) return { ...verdict, message: `${verdict.message}; ${why}` };
  const succeeded = job.last_success_at === null ? 'has never succeeded' : `last succeeded ${formatDuration(now - Date.parse(job.last_success_at))} ago`;
  return { ...verdict, state: 1, message: `${job.job} ${why}; ${succeeded}` };
}

function judgeRuns(job: JobStatus, limits: Limits, now: number, schedule: JobSchedule | null): Verdict {
  const name = job.job;
  const age = job.last_success_at === null ? null : now - Date.parse(job.last_success_at);
  const running = job.running_since === null ? null : now - Date.parse(job.running_since);
  const perf: Verdict['perf'] = [];
  const byAge = schedule === null;
  if (age !== null) perf.push(['last_success_age', age / 1000, byAge ? limits.warnAgeMs && limits.warnAgeMs / 1000 : null, byAge ? limits.maxAgeMs && limits.maxAgeMs / 1000 : null]);
  if (job.last_success_duration_ms !== null) perf.push(['last_success_duration', job.last_success_duration_ms / 1000, null, null]);
  if (running !== null) perf.push(['running_for', running / 1000, null, limits.maxDurationMs && limits.maxDurationMs / 1000]);
  const succeeded = age === null ? 'has never succeeded' : `succeeded ${formatDuration(age)} ago in ${formatDuration(job.last_success_duration_ms ?? 0)}`;
  if (job.state === 'disabled') {
    const why = job.disabled_reason ? `: ${job.disabled_reason}` : '';
    const scope = job.disabled_fleet_wide ? ' fleet-wide' : '';
    const until = job.disabled_until ? ` until ${job.disabled_until}` : '';
    return { state: 0, message: `${name} is paused${scope}${job.disabled_by ? ` by ${job.disabled_by}` : ''}${until}${why} (not checked; last ${succeeded})`, perf };
  }
  if (running !== null && limits.maxDurationMs !== null && running > limits.maxDurationMs) {
    return { state: 2, message: `${name} has been running for ${formatDuration(running)} on ${job.running_host} (over --max-duration ${formatDuration(limits.maxDurationMs)})`, perf };
  }
  if (job.last_status === null) {
    if (running !== null) return { state: 3, message: `${name} is running its first run (for ${formatDuration(running)}); nothing finished yet`, perf };
    return never(name);
  }
  if (isFailing(job) && job.last_status === 'succeeded') {
    return { state: 2, message: `${name}'s last run succeeded, but ${failedTargets(job)}; last ${succeeded}`, perf };
  }
  if (isFailing(job)) {
    const how = job.last_exit_code === null ? job.last_status : `${job.last_status} (exit ${job.last_exit_code})`;
    return { state: 2, message: `${name} last run ${how} ${formatDuration(now - Date.parse(job.last_started_at as string))} ago (run ${job.last_run_id}); last ${succeeded}`, perf };
  }
  if (schedule !== null) return judgeSchedule(job, schedule, limits, now, { age, succeeded, perf });
  if (age === null || (limits.maxAgeMs !== null && age > limits.maxAgeMs)) {
    return { state: 2, message: `${name} ${succeeded} (over --max-age ${formatDuration(limits.maxAgeMs ?? 0)})`, perf };
  }
  if (limits.warnAgeMs !== null && age > limits.warnAgeMs) {
    return { state: 1, message: `${name} ${succeeded} (over --warn-age ${formatDuration(limits.warnAgeMs)})`, perf };
  }
  return { state: 0, message: `${name} ${succeeded}${running === null ? '' : `; running for ${formatDuration(running)}`}`, perf };
}

// A job with a stored schedule is late when its schedule made it due more than --max-age
// (--warn-age) ago and it has not started since, or stale when it has not succeeded since the
// fire before its schedule's latest: two fires missed in a row, whatever the gaps between
// them. A run that starts late but fails does not hide a job that stopped succeeding.
function judgeSchedule(job: JobStatus, schedule: JobSchedule, limits: Limits, now: number, runs: { age: number | null; succeeded: string; perf: Verdict['perf'] }): Verdict {
  const { age, succeeded, perf } = runs;
  const name = job.job;
  if (schedule.due === null) return { state: 2, message: `${name} has a stored schedule that cannot be read (${schedule.problem}): --scheduled does not run it; last ${succeeded}`, perf };
  const late = schedule.due.due ? now - schedule.due.at.getTime() : 0;
  perf.push(['late', late / 1000, limits.warnAgeMs && limits.warnAgeMs / 1000, limits.maxAgeMs && limits.maxAgeMs / 1000]);
  const since = `is late: due since ${schedule.due.at.toISOString()} by its schedule '${schedule.text}', ${formatDuration(late)} ago`;
  if (limits.maxAgeMs !== null && late > limits.maxAgeMs) return { state: 2, message: `${name} ${since} (over --max-age ${formatDuration(limits.maxAgeMs)}); last ${succeeded}`, perf };
  const stale = schedule.staleBeforeMs;
  if (stale !== null && age !== null && now - age < stale) {
    return { state: 2, message: `${name} ${succeeded}: it missed two fires in a row of its schedule '${schedule.text}' (none succeeded since ${new Date(stale).toISOString()})`, perf };
  }
  if (limits.warnAgeMs !== null && late > limits.warnAgeMs) return { state: 1, message: `${name} ${since} (over --warn-age ${formatDuration(limits.warnAgeMs)}); last ${succeeded}`, perf };
  const next = schedule.due.due ? `due since ${schedule.due.at.toISOString()}` : `next due ${schedule.due.at.toISOString()}`;
  return { state: 0, message: `${name} ${succeeded}; ${next}`, perf };
}

function print(job: string | null, v: Verdict, json: boolean): number {
  // One line a monitor reads: text from the run log cannot end it, nor start performance
  // data with a '|' of its own.
  const message = printable(redact(v.message)).replaceAll('|', '/');
  if (json) {
    const perf = Object.fromEntries(v.perf.map(([label, value]) => [`${label}_s`, Math.round(value * 1000) / 1000]));
    process.stdout.write(`${JSON.stringify({ job, state: STATES[v.state], exit_code: v.state, message, ...perf }, null, 2)}\n`);
  } else {
    process.stdout.write(`${STATES[v.state]} - ${message}${perfData(v.perf)}\n`);
  }
  return v.state;
}

// Nagios performance data: 'label'=value[UOM];warn;crit;min;max, seconds here.
function perfData(perf: Verdict['perf']): string {
  if (perf.length === 0) return '';
  const n = (x: number | null) => (x === null ? '' : String(Math.round(x * 1000) / 1000));
  return ` | ${perf.map(([label, value, warn, crit]) => `${label}=${n(value)}s;${n(warn)};${n(crit)};0;`).join(' ')}`;
}
