import { refuseNonUtf8Arguments, refuseNonUtf8Environment } from './cli/bytes.js';
import { resolveRunConfig, usesFleet } from './cli/config.js';
import { parseRunArgs, runHelp, VERSION } from './cli/options.js';
import { loadSecrets } from './cli/secrecy.js';
import { Settings } from './cli/settings.js';
import { CronguardError, EXIT, UsageError } from './errors.js';
import { runJob } from './run/job.js';
import { answerDoorbell } from './run/stop/stop-listener.js';
import { restoreExtraCaCerts } from './util/extra-ca.js';
import { flushed, messages, ownLine } from './util/io.js';
import { isRoot } from './util/paths.js';
import { addSecret, addSecretsOf, redact } from './util/redact.js';

export type Subcommand = (args: readonly string[], settings: Settings) => Promise<number>;

// Subcommands load lazily: the run path must not pay for commander, chalk or their code.
const SUBCOMMANDS: Record<string, () => Promise<Subcommand>> = {
  history: async () => (await import('./commands/runs.js')).history,
  logs: async () => (await import('./commands/logs.js')).logs,
  migrate: async () => (await import('./commands/migrate.js')).migrate,
  locks: async () => (await import('./commands/locks.js')).locks,
  status: async () => (await import('./commands/status.js')).status,
  disable: async () => (await import('./commands/disable.js')).disable,
  enable: async () => (await import('./commands/disable.js')).enable,
  schedule: async () => (await import('./commands/schedule.js')).schedule,
  request: async () => (await import('./commands/requests.js')).request,
  requests: async () => (await import('./commands/requests.js')).requests,
  check: async () => (await import('./commands/check.js')).check,
  metrics: async () => (await import('./commands/metrics.js')).metrics,
  prune: async () => (await import('./commands/prune.js')).prune,
  stop: async () => (await import('./commands/stop.js')).stop,
  // The web page: its HTTP framework loads with it, never on the run path.
  serve: async () => (await import('./commands/serve.js')).serve,
};

async function main(args: readonly string[]): Promise<number> {
  restoreExtraCaCerts();
  protectSecrets(args);
  refuseNonUtf8Arguments(args);
  const first = args[0];
  if (first === undefined) {
    process.stderr.write(runHelp());
    return EXIT.usage;
  }
  if (first === 'help') return help(args.slice(1));
  if (Object.hasOwn(SUBCOMMANDS, first)) return subcommand(first, args.slice(1));
  answerDoorbell();
  const parsed = parseRunArgs(first === 'run' ? args.slice(1) : args);
  if (parsed.options.help) {
    process.stdout.write(runHelp());
    return 0;
  }
  if (parsed.options.version) {
    process.stdout.write(`cronguard ${VERSION}\n`);
    return 0;
  }
  // What the command (and --notify's) would inherit changed.
  refuseNonUtf8Environment();
  const verbose = parsed.options.verbose === true;
  showWarnings = verbose;
  const settings = loadSettings(verbose);
  // The dialects' code (and a Redis lock's) loads only for a run that has a database (or one).
  const fleet = usesFleet(parsed, settings) ? (await import('./cli/fleet.js')).FLEET : null;
  const config = resolveRunConfig(parsed, { env: process.env, root: isRoot(), settings, fleet });
  // First of all: nothing may be recorded or said before its secrets are known.
  const fileEnv = await loadSecrets(config);
  const say = messages(verbose);
  for (const line of config.warnings) say.warn(line);
  for (const line of config.sources) say.verbose(line);
  const code = await runJob(config, fileEnv, say);
  say.verbose(codeCacheNote());
  return code;
}

// Whether start-up used the code cache (src/boot/), so an operator can check an install.
function codeCacheNote(): string {
  const tally = (globalThis as Record<symbol, { used: number; rejected: number; missing: number } | undefined>)[Symbol.for('cronguard.codeCache')];
  if (!tally) return 'code cache: not in use (running from source)';
  return `code cache: ${tally.used} files compiled from it, ${tally.rejected} rejected by V8, ${tally.missing} without one`;
}

// Registers every password cronguard may be handed before anything is parsed, so that no
// message, however early or malformed its input, can print one.
function protectSecrets(args: readonly string[]): void {
  args.forEach((arg, i) => {
    if (arg === '--db' || arg === '--lock-url' || arg === '--ping-url') addSecretsOf(args[i + 1]);
    else if (arg.startsWith('--db=')) addSecretsOf(arg.slice(5));
    else if (arg.startsWith('--lock-url=')) addSecretsOf(arg.slice(11));
    else if (arg.startsWith('--ping-url=')) addSecretsOf(arg.slice(11));
  });
  addSecretsOf(process.env.CRONGUARD_DATABASE_URL);
  addSecretsOf(process.env.CRONGUARD_LOCK_URL);
  addSecret(process.env.PGPASSWORD);
}

// Configuration-file warnings go out once per invocation (a password others can read is
// worth a cron mail); notes only with -v.
function loadSettings(verbose: boolean): Settings {
  const settings = Settings.load(process.env);
  const say = messages(verbose);
  for (const line of settings.warnings) say.warn(line);
  for (const line of settings.notes) say.verbose(line);
  return settings;
}

// `cronguard help [SUBCOMMAND]`: the usage, or a subcommand's own --help.
async function help(args: readonly string[]): Promise<number> {
  const topic = args[0];
  if (topic === undefined || topic === 'run') {
    process.stdout.write(runHelp());
    return 0;
  }
  if (!Object.hasOwn(SUBCOMMANDS, topic)) throw new UsageError(`help: no subcommand '${topic}'`);
  return subcommand(topic, ['--help']);
}

async function subcommand(name: string, args: readonly string[]): Promise<number> {
  const run = await (SUBCOMMANDS[name] as () => Promise<Subcommand>)();
  try {
    return await run(args, loadSettings(false));
  } catch (error) {
    const mapped = error instanceof CronguardError ? error : (await import('./store/store-error.js')).storeError(error);
    throw mapped ? mapped.within(`cronguard ${name}`) : error;
  }
}

// The boundary: every error becomes one line on stderr and an exit code. Only a bug shows
// a stack, and then it says so.
function report(error: unknown): number {
  if (error instanceof CronguardError) {
    if (error.message) process.stderr.write(redact(ownLine(`${error.command ?? 'cronguard'}: ${error.message}${hint(error)}\n`)));
    return error.exitCode;
  }
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(redact(ownLine(`cronguard: internal error (this is a bug; please report it): ${detail}\n`)));
  return EXIT.internal;
}

// A usage error points at the help that explains the right usage.
function hint(error: CronguardError): string {
  if (!(error instanceof UsageError)) return '';
  return ` (see ${error.command ?? 'cronguard'} --help)`;
}

// Not process.exit() at once: on Node.js 24 it shuts V8's platform down while the isolate
// still runs, and a background compile waiting for a garbage collection then deadlocks it
// (nodejs/node#54918): about 3 runs in 100 after a large output never ended, their job done.
// Letting the event loop end disposes the isolate first. A handle still open (the pipes of
// a command a lost lock's watchdog is ending, a browser's idle connection to serve) ends it
// a moment later by process.exit, as before.
const EXIT_FALLBACK_MS = 250;

async function exit(code: number): Promise<never> {
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  // Output given up on (its reader stopped reading; see run/supervisor/relay.ts) is dropped at once.
  if (process.stdout.writableLength > 0 || process.stderr.writableLength > 0) process.exit(code);
  process.exitCode = code;
  afterUnref(EXIT_FALLBACK_MS, () => process.exit(code));
  return new Promise<never>(() => {});
}

// Calls `then` after `ms` unless the process has ended: what setTimeout(...).unref() does,
// without the cost of Node's timers, which a plain run would load and compile only for this
// (about 1% of its start-up). V8 times Atomics.waitAsync itself, and its wait does not keep
// the event loop alive.
function afterUnref(ms: number, then: () => void): void {
  // Node 20's TypeScript library does not declare it yet (ES2024).
  const { waitAsync } = Atomics as unknown as { waitAsync(array: Int32Array, index: number, value: number, ms: number): { value: Promise<string> | string } };
  void Promise.resolve(waitAsync(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms).value).then(then);
}

// Node prints process warnings (deprecations, a library's notices) to stderr, which cron
// mails on every run; they are for -v only.
let showWarnings = false;
process.removeAllListeners('warning');
process.on('warning', (warning) => {
  if (showWarnings) messages(true).verbose(`node: ${warning.name}: ${warning.message}`);
});

// A stdout or stderr whose reader went away must not crash cronguard with an unhandled
// 'error' when it writes a line of its own; whoever writes the command's output (the relay),
// or a subcommand's, listens for itself.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});

// A promise that never settles would let the event loop drain and Node exit 0 without
// running the job: cron would see success. That is a bug, and must say so.
let settled = false;
process.once('beforeExit', () => {
  if (!settled) void exit(report(new Error('cronguard stopped waiting for something that never happened')));
});

main(process.argv.slice(2)).then(
  (code) => {
    settled = true;
    return exit(code);
  },
  (error: unknown) => {
    settled = true;
    return exit(report(error));
  },
);
