import type { Settings } from '../cli/settings.js';
import { NotFoundError, UsageError } from '../errors.js';
import { validateName } from '../util/name.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

// `cronguard logs RUN_ID|NAME`: the captured output of one run (a job's latest for NAME),
// byte for byte on stdout; notes about it go to stderr so the output can be piped.
export async function logs(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('logs', 'captured output of a run')).argument(
    '<run>',
    'a run id, or a job name for its latest run',
  );
  parse(program, args);
  const target = program.args[0] as string;
  const byId = /^\d+$/.test(target);
  if (byId && !/^\d{1,15}$/.test(target)) throw new UsageError(`'${target}' is too large to be a run id`);
  if (!byId) validateName(target);
  const store = await new StoreChoice(program.opts(), settings).openExisting();
  const run = store ? await (byId ? store.getRun(Number(target)) : store.latestRun(target)) : null;
  await store?.close();
  if (!run) throw new NotFoundError(byId ? `no run with id ${target}` : `no runs recorded for job ${target}`);
  if (run.output === null) {
    process.stderr.write(`cronguard: run ${run.id} kept no output (--capture 0 or still running)\n`);
    return 0;
  }
  process.stdout.write(run.output);
  if (run.output_truncated) {
    process.stderr.write(`cronguard: run ${run.id}: output truncated; this is its last ${Buffer.byteLength(run.output)} bytes\n`);
  }
  return 0;
}
