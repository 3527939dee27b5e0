import type { Settings } from '../cli/settings.js';
import { NotFoundError, UsageError } from '../errors.js';
import { printable } from '../present/format.js';
import { jobSchedule } from '../schedule/job.js';
import { cronSchedule, everySchedule, parseSchedule, type Schedule, validZone } from '../schedule/spec.js';
import { validateName } from '../util/name.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

interface Flags {
  every?: string;
  cron?: string;
  tz?: string;
  clear?: boolean;
}

// `cronguard schedule NAME (--every D | --cron EXPR [--tz ZONE] | --clear)`: stores when a
// job runs, as data a web application may change too; the command stays in crontab (a
// database writer must never choose what runs as root). Without a flag, says the schedule.
export async function schedule(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('schedule', 'store when a job runs; without a flag, show it'))
    .argument('<name>', 'the job')
    .option('--every <duration>', 'every DURATION after its last start (e.g. 15m, 1h, 1d)')
    .option('--cron <expr>', 'a five-field cron expression (e.g. "0 3 * * 1-5", @daily)')
    .option('--tz <zone>', "the time zone --cron is read in (e.g. Europe/Warsaw; default: the host's)")
    .option('--clear', 'remove the schedule');
  parse(program, args);
  const name = validateName(program.args[0] as string);
  const wanted = chosen(program.opts<Flags>());
  const log = await new StoreChoice(program.opts(), settings).open();
  try {
    const [job] = await log.jobStatus(name);
    if (wanted === undefined) {
      // Written by hand, it may hold anything its shape allows: never a control character raw.
      process.stdout.write(`${printable(job?.schedule ?? 'none')}\n`);
      // One that cannot be read (an UPDATE by hand) is not in force: a script reading it, or
      // a web form showing it, learns so by the exit code, and why on stderr.
      const problem = job ? jobSchedule(job, Date.now())?.problem : null;
      if (!problem) return 0;
      process.stderr.write(`cronguard schedule: ${printable(name)}'s stored schedule cannot be read (${printable(problem)}): --scheduled does not run it; set it again with --every or --cron\n`);
      return 1;
    }
    if (wanted === null) {
      // A mistyped name must not read as done.
      if (!job) throw new NotFoundError(`no job ${name} in the run log; nothing to clear`);
      await log.setSchedule(name, null);
      process.stderr.write(`cronguard: ${name} has no schedule now\n`);
      return 0;
    }
    await log.setSchedule(name, wanted.text);
  } finally {
    await log.close();
  }
  const next = wanted.kind === 'cron' ? ` (next fire ${wanted.cron.nextRun()?.toISOString()})` : '';
  process.stderr.write(`cronguard: ${name} scheduled: ${wanted.text}${next}\n`);
  return 0;
}

// The schedule the flags ask for: undefined to show it, null to clear it.
function chosen(flags: Flags): Schedule | null | undefined {
  const given = [flags.every, flags.cron, flags.clear].filter((f) => f !== undefined).length;
  if (given > 1) throw new UsageError('give one of --every, --cron or --clear');
  if (flags.tz !== undefined && flags.cron === undefined) throw new UsageError('--tz applies to --cron');
  if (flags.clear) return null;
  if (flags.every !== undefined) return everySchedule(flags.every, '--every');
  if (flags.cron !== undefined) {
    // `--cron 'TZ=Europe/Warsaw 0 3 * * *'` is the stored spelling too; `--cron 'every 1h'` is not cron.
    if (flags.tz === undefined && !/^\s*every\b/i.test(flags.cron)) return parseSchedule(flags.cron, '--cron');
    return cronSchedule(flags.cron, flags.tz === undefined ? null : validZone(flags.tz, '--tz'), '--cron');
  }
  return undefined;
}
