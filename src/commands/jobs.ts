import type { Settings } from '../cli/settings.js';
import { NotFoundError, UsageError } from '../errors.js';
import { validateName } from '../util/name.js';
import { userName } from '../util/user.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

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
  try {
    // A mistyped name must not read as done.
    const [job] = await log.jobStatus(name);
    if (!job) throw new NotFoundError(`no job ${name} in the run log; nothing to resume`);
    if (job.state !== 'disabled') {
      process.stderr.write(`cronguard: ${name} was not paused\n`);
      return 0;
    }
    await log.setPaused(name, null);
  } finally {
    await log.close();
  }
  process.stderr.write(`cronguard: ${name} resumed\n`);
  return 0;
}
