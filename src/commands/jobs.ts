import type { Settings } from '../cli/settings.js';
import { NotFoundError, UsageError } from '../errors.js';
import type { JobStatus } from '../store/jobs.js';
import { validateName } from '../util/name.js';
import { userName } from '../util/user.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';
import { colours, paintStatus, renderTable, shortTime } from './table.js';

// `cronguard status [NAME]`: one line per job the log knows of: running (since when, where)
// or idle or paused (why), how it last ended, when it last succeeded, requests waiting.
export async function status(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('status', 'each job: running, idle or paused, last result, requests'))
    .argument('[name]', 'only this job')
    .option('--json', 'print one JSON array, an object per job');
  parse(program, args);
  const name = program.args[0];
  if (name !== undefined) validateName(name);
  const log = await new StoreChoice(program.opts(), settings).openExisting();
  const jobs = log ? await log.jobStatus(name ?? null).finally(() => log.close()) : [];
  if (name !== undefined && jobs.length === 0) throw new NotFoundError(`no job ${name} in the run log`);
  if (program.opts<{ json?: boolean }>().json) {
    process.stdout.write(`${JSON.stringify(jobs, null, 2)}\n`);
  } else if (jobs.length === 0) {
    process.stderr.write('cronguard: no jobs recorded\n');
  } else {
    const c = colours();
    process.stdout.write(renderTable(['JOB', 'STATE', 'SINCE', 'LAST', 'EXIT', 'STARTED', 'LAST SUCCESS', 'REQ'], jobs.map((j) => cells(j, c)), c));
  }
  return 0;
}

function cells(j: JobStatus, c: ReturnType<typeof colours>): string[] {
  const state =
    j.state === 'running' ? c.cyan(`running on ${j.running_host}`) : j.state === 'disabled' ? c.yellow(`paused${j.disabled_reason ? `: ${j.disabled_reason}` : ''}`) : 'idle';
  const since = j.state === 'running' ? j.running_since : j.state === 'disabled' ? j.disabled_since : null;
  return [
    j.job, state, shortTime(since), j.last_status ? paintStatus(c, j.last_status) : '-', j.last_exit_code === null ? '-' : String(j.last_exit_code),
    shortTime(j.last_started_at), shortTime(j.last_success_at), String(j.pending_requests),
  ];
}

// `cronguard disable NAME [--reason TEXT]`: pauses a job. Its invocations exit 0 without
// running, and its requests wait, until `cronguard enable NAME`.
export async function disable(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('disable', 'pause a job until enable'))
    .argument('<name>', 'the job')
    .option('--reason <text>', 'why, shown by status and -v')
    .option('--by <who>', 'who paused it (default: this user)');
  parse(program, args);
  const name = validateName(program.args[0] as string);
  const flags = program.opts<{ reason?: string; by?: string }>();
  if ((flags.reason?.length ?? 0) > 1000) throw new UsageError('--reason: at most 1000 characters');
  const log = await new StoreChoice(program.opts(), settings).open();
  await log.setPaused(name, { reason: flags.reason ?? null, since: new Date().toISOString(), by: flags.by ?? userName() }).finally(() => log.close());
  process.stderr.write(`cronguard: ${name} paused (cronguard enable ${name} resumes it)\n`);
  return 0;
}

// `cronguard enable NAME`: resumes a paused job; its waiting requests run at its next
// invocation.
export async function enable(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('enable', 'resume a paused job')).argument('<name>', 'the job');
  parse(program, args);
  const name = validateName(program.args[0] as string);
  const log = await new StoreChoice(program.opts(), settings).open();
  await log.setPaused(name, null).finally(() => log.close());
  process.stderr.write(`cronguard: ${name} resumed\n`);
  return 0;
}
