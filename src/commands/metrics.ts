import type { Settings } from '../cli/settings.js';
import { exposition } from '../metrics/exposition.js';
import { parse, StoreChoice, subcommand, withStoreOptions } from './common.js';

// `cronguard metrics`: every job in the Prometheus text format on stdout, the same families
// as the --metrics-dir textfiles; for a scrape script, or node_exporter's textfile
// collector fed from cron (`cronguard metrics > dir/cronguard.prom.tmp && mv ...`).
export async function metrics(args: readonly string[], settings: Settings): Promise<number> {
  const program = withStoreOptions(subcommand('metrics', 'Prometheus exposition of every job on stdout'));
  parse(program, args);
  const store = await new StoreChoice(program.opts(), settings).openExisting();
  const jobs = store ? await store.jobStatus(null).finally(() => store.close()) : [];
  process.stdout.write(await exposition(jobs));
  return 0;
}
