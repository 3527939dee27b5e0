import type { Settings } from '../cli/settings.js';
import { UsageError } from '../errors.js';
import { formatDuration, parseDuration } from '../util/duration.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

// `cronguard prune --older-than D [--keep N]`: deletes finished runs that started more than
// D ago, and requests that ended then, in short batches that never hold up a run. Each job
// keeps its latest N runs and its latest success whatever their age; running rows stay.
export async function prune(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('prune', 'delete old finished runs'))
    .requiredOption('--older-than <duration>', 'runs that started longer ago than this go (e.g. 90d)')
    .option('--keep <n>', 'each job keeps its latest N runs however old (default 10)', keepCount, 10)
    .option('--json', 'print what was deleted as JSON');
  parse(program, args);
  const flags = program.opts<{ olderThan: string; keep: number; json?: boolean }>();
  const olderThan = parseDuration(flags.olderThan, '--older-than');
  const before = new Date(Date.now() - olderThan);
  const store = await new StoreChoice(program.opts(), settings).openExisting();
  const result = store
    ? await store.prune({ before, keep: flags.keep, deadline: Number.POSITIVE_INFINITY }).finally(() => store.close())
    : { runs: 0, requests: 0, complete: true };
  if (flags.json) {
    process.stdout.write(`${JSON.stringify({ runs: result.runs, requests: result.requests, before: before.toISOString(), keep: flags.keep })}\n`);
  } else {
    process.stderr.write(`cronguard: pruned ${result.runs} run${result.runs === 1 ? '' : 's'} and ${result.requests} request${result.requests === 1 ? '' : 's'} older than ${formatDuration(olderThan)} (each job keeps its latest ${flags.keep} and its latest success)\n`);
  }
  return 0;
}

function keepCount(value: string): number {
  if (!/^\d{1,7}$/.test(value)) throw new UsageError(`--keep: '${value}' is not a whole number from 0 up`);
  return Number(value);
}
