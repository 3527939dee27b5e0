import { resolveRunConfig } from './cli/config.js';
import { parseRunArgs, runHelp, VERSION } from './cli/options.js';
import { CronguardError, EXIT, UsageError } from './errors.js';
import { runJob } from './run/job.js';
import { flushed, messages } from './util/io.js';
import { isRoot } from './util/paths.js';

type Subcommand = (args: readonly string[]) => Promise<number>;

// Subcommands load lazily: the run path must not pay for commander, chalk or their code.
const SUBCOMMANDS: Record<string, () => Promise<Subcommand>> = {
  history: async () => (await import('./commands/runs.js')).history,
  logs: async () => (await import('./commands/runs.js')).logs,
  migrate: async () => (await import('./commands/runs.js')).migrate,
  locks: async () => (await import('./commands/locks.js')).locks,
};

// Reserved by the contract for later versions; claimed now so a crontab line written today
// never silently changes meaning (a program with such a name runs as `cronguard -- NAME`).
const RESERVED = ['status', 'check', 'request', 'disable', 'enable', 'prune'];

async function main(args: readonly string[]): Promise<number> {
  const first = args[0];
  if (first !== undefined && first in SUBCOMMANDS) {
    return (await (SUBCOMMANDS[first] as () => Promise<Subcommand>)())(args.slice(1));
  }
  if (first !== undefined && RESERVED.includes(first)) {
    throw new UsageError(
      `'${first}' is not available in this version; to run a program named ${first}, use: cronguard -- ${first}`,
    );
  }
  const parsed = parseRunArgs(first === 'run' ? args.slice(1) : args);
  if (parsed.options.help) {
    process.stdout.write(runHelp());
    return 0;
  }
  if (parsed.options.version) {
    process.stdout.write(`cronguard ${VERSION}\n`);
    return 0;
  }
  const config = resolveRunConfig(parsed, { env: process.env, root: isRoot() });
  return runJob(config, messages(config.verbose));
}

// The boundary: every error becomes one line on stderr and an exit code. Only a bug shows
// a stack, and then it says so.
function report(error: unknown): number {
  if (error instanceof CronguardError) {
    const hint = error instanceof UsageError ? ' (see cronguard --help)' : '';
    if (error.message) process.stderr.write(`cronguard: ${error.message}${hint}\n`);
    return error.exitCode;
  }
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`cronguard: internal error (this is a bug; please report it): ${detail}\n`);
  return EXIT.internal;
}

async function exit(code: number): Promise<never> {
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  process.exit(code);
}

main(process.argv.slice(2)).then(exit, (error: unknown) => exit(report(error)));
