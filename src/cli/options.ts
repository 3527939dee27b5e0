import { UsageError } from '../errors.js';

// The options of `run`, in one table that drives both the parser and --help. The run path
// parses by hand rather than through commander: the contract's grammar (the first word that
// is not an option starts the command) is simple, and start-up time is a product feature.
export interface OptionSpec {
  readonly key: string;
  readonly long: string;
  readonly short?: string;
  readonly value?: string;
  readonly help: string;
  // Where --help lists it, after the first screen.
  readonly group: OptionGroup;
  // On --help's first screen, with this shorter text: what most crontab lines need.
  readonly brief?: string;
  // Given more than once, every value counts (see ParsedRun.repeated).
  readonly repeatable?: boolean;
}

// --help's groups, in its order, each with its heading.
const GROUPS = {
  command: 'The command',
  lock: 'The lock',
  timing: 'Timing and retries',
  loops: 'Loops and requests',
  output: 'Output and outcome',
  log: 'The run log',
  alerts: 'Alerts and monitoring',
  fleet: 'A fleet (PostgreSQL, MySQL/MariaDB)',
  general: 'This program',
} as const;

export type OptionGroup = keyof typeof GROUPS;

export const RUN_OPTIONS: readonly OptionSpec[] = [
  { key: 'name', long: 'name', short: 'n', value: 'NAME', group: 'command', brief: 'job name: the lock and run-log key', help: 'job name: the lock and run-log key (default: derived from the command)' },
  { key: 'shell', long: 'shell-command', short: 'c', value: 'STRING', group: 'command', help: 'run STRING through /bin/sh -c instead of a command and arguments' },
  { key: 'lock', long: 'lock', short: 'l', value: 'BACKEND', group: 'lock', help: "lock backend: flock, lockfile, postgres, mysql, lease, redis or none (default: flock with --lock-file; else redis with a redis:// lock URL; else the database's own, postgres or mysql, with a database; else flock)" },
  { key: 'lockUrl', long: 'lock-url', value: 'URL', group: 'lock', help: 'redis: the Redis or Valkey server of the lock ($CRONGUARD_LOCK_URL): redis://[USER[:PASS]@]HOST[:PORT][/DB][?prefix=P], or rediss:// for TLS (?ca=FILE); implies -l redis, the log wherever it is' },
  { key: 'leaseTtl', long: 'lease-ttl', value: 'DURATION', group: 'lock', help: 'lease, redis: how long a lease lives unrenewed, renewed every third of it (default 30s, 5s to 24d)' },
  { key: 'lockFile', long: 'lock-file', value: 'PATH', group: 'lock', help: 'flock exactly this file (shared with util-linux flock PATH); implies -l flock, the log wherever it is' },
  { key: 'lockDir', long: 'lock-dir', value: 'DIR', group: 'lock', help: 'where lock files live ($CRONGUARD_LOCK_DIR)' },
  { key: 'maxRunning', long: 'max-running', value: 'N', group: 'lock', help: 'let up to N copies run at once (1 to 64, default 1): each takes the first free of N slots of its lock, given as $CRONGUARD_SLOT (0 to N-1)' },
  { key: 'lockKey', long: 'lock-key', value: 'N', group: 'lock', help: 'postgres: share this signed 64-bit advisory lock key (jobs, an application) instead of the hashed name' },
  { key: 'db', long: 'db', value: 'URL', group: 'fleet', brief: 'lock and log in PostgreSQL or MySQL, for a fleet', help: 'the database for the lock and run log ($CRONGUARD_DATABASE_URL): a PostgreSQL URL (hosts may be a list) or libpq keyword=value pairs, PG* variables filling in what it leaves out; or mysql://USER[:PASS]@HOST[:PORT][/DB] (also mariadb://)' },
  { key: 'schema', long: 'schema', value: 'NAME', group: 'fleet', help: 'the run log\'s PostgreSQL schema, or MySQL database ($CRONGUARD_SCHEMA, default cronguard)' },
  { key: 'onLockLoss', long: 'on-lock-loss', value: 'ACTION', group: 'lock', help: 'postgres, mysql, lease, redis: terminate (default) or continue the command if the lock is lost' },
  { key: 'stateDir', long: 'state-dir', value: 'DIR', group: 'log', help: 'where the embedded run log lives ($CRONGUARD_STATE_DIR)' },
  { key: 'noLog', long: 'no-log', group: 'log', help: 'keep no run log' },
  { key: 'wait', long: 'wait', short: 'w', value: 'DURATION', group: 'lock', brief: 'wait for the lock up to DURATION, not skip', help: 'wait up to DURATION for the lock instead of skipping (-w 0: skip at once)' },
  { key: 'conflictExitCode', long: 'conflict-exit-code', short: 'E', value: 'N', group: 'lock', help: 'exit code when skipped because the lock is held (default 0)' },
  { key: 'timeout', long: 'timeout', short: 't', value: 'DURATION', group: 'timing', brief: 'stop its process tree after DURATION (exit 124)', help: 'stop the command after DURATION (exit 124)' },
  { key: 'killSignal', long: 'kill-signal', value: 'SIG', group: 'timing', help: 'signal sent to the process group on timeout (default TERM)' },
  { key: 'killAfter', long: 'kill-after', value: 'DURATION', group: 'timing', help: 'then SIGKILL after DURATION (default 10s)' },
  { key: 'quiet', long: 'quiet', short: 'q', group: 'output', brief: "print the command's output only if it fails", help: "print the command's output only if it fails (with --retries: the last attempt)" },
  { key: 'minDuration', long: 'min-duration', value: 'DURATION', group: 'output', help: 'a run that exits 0 sooner than DURATION has failed (exit 1; the reason in the run log)' },
  { key: 'failOnStderr', long: 'fail-on-stderr', group: 'output', help: "a run that exits 0 but wrote to stderr has failed (exit 1), except a shell's set -x trace lines (PS4, default '+ ', repeated)" },
  { key: 'capture', long: 'capture', value: 'BYTES', group: 'log', help: 'keep the last BYTES of output in the run log (default 65536, 0: none)' },
  { key: 'replace', long: 'replace', group: 'lock', help: 'stop the running copy of the job (on any host; recorded killed, "replaced by run N") and run this one' },
  { key: 'everyTick', long: 'every-tick', group: 'fleet', help: 'shared log or redis lock: run even if another host ran this job in this minute' },
  { key: 'minInterval', long: 'min-interval', value: 'DURATION', group: 'timing', brief: 'skip unless the last run started DURATION ago', help: 'skip unless the last run started at least DURATION ago, less a tenth (at most 30s) for cron\'s jitter (a request overrides)' },
  { key: 'onRequest', long: 'on-request', group: 'loops', help: 'run only for "run now" requests (with --min-interval: for either)' },
  { key: 'scheduled', long: 'scheduled', group: 'loops', help: "run when the job's stored schedule (cronguard schedule) is due, or for a request; without one it does not run" },
  { key: 'batch', long: 'batch', group: 'loops', help: 'one run for all due requests, their arguments appended to the command (identical ones once); the command may report per argument in $CRONGUARD_RESULTS (ARG<TAB>ok|failed)' },
  { key: 'batchMax', long: 'batch-max', value: 'N', group: 'loops', help: 'at most N requests in one --batch run; the rest wait' },
  { key: 'retries', long: 'retries', value: 'N', group: 'timing', help: 're-run a failed attempt up to N more times, holding the lock' },
  { key: 'retryDelay', long: 'retry-delay', value: 'DURATION', group: 'timing', help: 'before the first retry; doubling, at most 1h (default 10s)' },
  { key: 'retryOnTimeout', long: 'retry-on-timeout', group: 'timing', help: 'retry an attempt that timed out too' },
  { key: 'every', long: 'every', value: 'DURATION', group: 'loops', brief: 'with --for W: a loop, a run every DURATION for W', help: 'holding the lock, start the command every DURATION (needs --for)' },
  { key: 'for', long: 'for', value: 'DURATION', group: 'loops', help: 'keep the lock this long for --every, --on-request or --scheduled, serving requests at once; finding it held, wait up to 10s for it (the loop before hands over)' },
  { key: 'jitter', long: 'jitter', value: 'DURATION', group: 'timing', help: 'wait a random time up to DURATION before trying the lock' },
  { key: 'metricsDir', long: 'metrics-dir', value: 'DIR', group: 'alerts', help: "rewrite DIR/cronguard_NAME.prom for node_exporter's textfile collector ($CRONGUARD_METRICS_DIR)" },
  { key: 'pingUrl', long: 'ping-url', value: 'URL', group: 'alerts', help: 'report each run to URL (Healthchecks): URL/start, then URL or URL/fail' },
  { key: 'pingExitCode', long: 'ping-exit-code', group: 'alerts', help: 'end with URL/<exit code> (0 too) instead of URL or URL/fail' },
  { key: 'pingBodyBytes', long: 'ping-body-bytes', value: 'N', group: 'alerts', help: 'send the last N bytes of output with the end (default 10240, 0: none)' },
  { key: 'notify', long: 'notify', value: 'CMD', group: 'alerts', help: 'on the first failure of a streak and the first success after it, run CMD through /bin/sh -c (env CRONGUARD_EVENT=failed|recovered, ...; output tail on stdin; $CRONGUARD_NOTIFY)' },
  { key: 'notifyUrl', long: 'notify-url', value: 'URL', group: 'alerts', brief: 'POST the first failure and the recovery to URL', help: 'the same, as a JSON POST to URL ($CRONGUARD_NOTIFY_URL)' },
  { key: 'notifyTimeout', long: 'notify-timeout', value: 'DURATION', group: 'alerts', help: "each notifier's bound; a command's process group is then killed (default 30s)" },
  { key: 'envFile', long: 'env-file', value: 'FILE', group: 'command', help: "set the command's environment from FILE (KEY=VALUE lines, dotenv syntax; $CRONGUARD_ENV_FILE); FILE must be yours or root's and unreadable by others. Its values are masked like --redact" },
  { key: 'redact', long: 'redact', value: 'REGEX', repeatable: true, group: 'command', help: 'mask what REGEX matches with *** in the recorded command and output, in what cronguard passes on, pings and notifications (repeatable; $CRONGUARD_REDACT, the config file\'s redact lines add to it)' },
  { key: 'recordCommand', long: 'record-command', value: 'on|off', group: 'command', help: 'off: keep the command line out of the run log (shown as a placeholder everywhere)' },
  { key: 'syslog', long: 'syslog', group: 'alerts', help: 'log a line at the start and end of each run to the local syslog socket, /dev/log ($CRONGUARD_SYSLOG, $CRONGUARD_SYSLOG_SOCKET)' },
  { key: 'verbose', long: 'verbose', short: 'v', group: 'output', help: 'explain decisions on stderr' },
  { key: 'help', long: 'help', short: 'h', group: 'general', help: 'show this help' },
  { key: 'version', long: 'version', short: 'V', group: 'general', help: 'show the version' },
];

export type RawOptions = Readonly<Record<string, string | true>>;

export interface ParsedRun {
  readonly options: RawOptions;
  // The values of repeatable options, in the order given.
  readonly repeated: Readonly<Record<string, readonly string[]>>;
  readonly command: readonly string[];
}

const byLong = new Map(RUN_OPTIONS.map((o) => [o.long, o]));
const byShort = new Map(RUN_OPTIONS.filter((o) => o.short).map((o) => [o.short as string, o]));

// Splits `[options] [--] command args...`. Options after the command belong to the command.
export function parseRunArgs(args: readonly string[]): ParsedRun {
  const options: Record<string, string | true> = {};
  const repeated: Record<string, string[]> = {};
  const set = (spec: OptionSpec, value: string | true) => {
    if (spec.repeatable && typeof value === 'string') repeated[spec.key] = [...(repeated[spec.key] ?? []), value];
    else options[spec.key] = value;
  };
  let i = 0;
  const takeValue = (spec: OptionSpec, inline: string | undefined, shown: string): string => {
    if (inline !== undefined) return inline;
    const next = args[++i];
    if (next === undefined) throw new UsageError(`option ${shown} needs a value (${spec.value})`);
    return next;
  };
  for (; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') return { options, repeated, command: args.slice(i + 1) };
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const long = arg.slice(2, eq < 0 ? undefined : eq);
      const inline = eq < 0 ? undefined : arg.slice(eq + 1);
      const spec = byLong.get(long);
      if (!spec) throw new UsageError(`unknown option '--${long}'`);
      if (!spec.value && inline !== undefined) {
        throw new UsageError(`option --${long} takes no value`);
      }
      set(spec, spec.value ? takeValue(spec, inline, `--${long}`) : true);
    } else if (arg.length > 1 && arg.startsWith('-')) {
      for (let j = 1; j < arg.length; j++) {
        const spec = byShort.get(arg[j] as string);
        if (!spec) throw new UsageError(`unknown option '-${arg[j]}'`);
        if (!spec.value) {
          options[spec.key] = true;
          continue;
        }
        const rest = arg.slice(j + 1);
        set(spec, takeValue(spec, rest === '' ? undefined : rest, `-${spec.short}`));
        break;
      }
    } else {
      return { options, repeated, command: args.slice(i) };
    }
  }
  return { options, repeated, command: [] };
}

declare const CRONGUARD_VERSION: string;

export const VERSION = typeof CRONGUARD_VERSION === 'string' ? CRONGUARD_VERSION : '0.0.0-dev';

// The subcommands as --help lists them: each one's usage and what it does.
const SUBCOMMANDS: readonly (readonly [string, string])[] = [
  ['status [NAME]', 'each job at a glance: state, last result, recent runs'],
  ['history [NAME...]', 'recent runs, newest first (--since, --host, --status)'],
  ['logs RUN_ID|NAME', 'captured output of a run'],
  ['check NAME', 'monitoring plugin: --max-age D; OK/WARNING/CRITICAL/UNKNOWN'],
  ['metrics', 'Prometheus exposition of every job'],
  ['prune', 'delete finished runs --older-than D (--keep N)'],
  ['request NAME', 'ask for a run now (or --at TIME); --wait, --cancel ID'],
  ['requests [NAME]', 'pending and recent requests'],
  ['disable NAME', 'pause a job (--reason, --until TIME); enable NAME resumes'],
  ['disable --all', 'pause every job, for maintenance (--until TIME, --drain D); enable --all ends it'],
  ['stop NAME|RUN_ID', "stop a running run's process tree, on any host (--signal)"],
  ['schedule NAME', 'store when it runs (--every D, --cron EXPR, --clear)'],
  ['locks', 'locks held right now and by whom'],
  ['migrate', 'create or upgrade the run-log schema'],
  ['serve', 'web page and JSON API over the run log (--listen ADDR:PORT)'],
];

// --help for the run command, generated from the same table the parser uses, within 80
// columns. Its first screen (80x24) holds what most crontab lines need and the
// subcommands' names; every option follows, by group, then each subcommand in a line.
export function runHelp(): string {
  const flags = (o: OptionSpec) => `${o.short ? `-${o.short}, ` : '    '}--${o.long}${o.value ? ` ${o.value}` : ''}`;
  const briefs = RUN_OPTIONS.filter((o) => o.brief);
  const width = Math.max(...briefs.map((o) => flags(o).length)) + 4;
  const names = [...new Set(SUBCOMMANDS.flatMap(([usage]) => (usage.startsWith('disable') ? ['disable', 'enable'] : [usage.split(' ')[0] as string])))];
  const groups = Object.entries(GROUPS).map(([group, heading]) => {
    const rows = RUN_OPTIONS.filter((o) => o.group === group).map((o) => wrap(o.help, HELP_INDENT, `  ${flags(o)}`));
    return `${heading}:\n${rows.join('\n')}`;
  });
  return `Usage: cronguard [run] [options] [--] <command> [args...]
       cronguard [run] [options] -c '<shell string>'
       cronguard <subcommand> [options]
       cronguard help [subcommand]

Runs a command under a named lock, records every run, and skips silently when
another instance holds it or ran this minute. Options after the command are its.

What most crontab lines need:
${briefs.map((o) => `  ${flags(o)}`.padEnd(width) + o.brief).join('\n')}

Subcommands:
${wrap(names.join(' '), 2, '')}

Every option by group, then each subcommand, follow; man cronguard has it all.

${groups.join('\n\n')}

Subcommands (cronguard help SUBCOMMAND for their options):
${SUBCOMMANDS.map(([usage, text]) => wrap(text, 21, `  ${usage}`)).join('\n')}

Settings: flag, then environment, then $XDG_CONFIG_HOME/cronguard/config (or
$CRONGUARD_CONFIG), then /etc/cronguard.conf; -v says where each came from.
DURATION: 500ms, 10s, 5m, 2h, 1d, combinations like 1h30m; a bare number is
seconds.
Exit status: the command's own; 128+N if killed by signal N; 124 on timeout; 0
(or -E N) when skipped; 64 usage error; 69 database unavailable; 70 internal
error; 73 cannot create the lock; 75 lock lost; 77 permission denied; 126/127
not executable / not found. See cronguard(1).
`;
}

const HELP_INDENT = 28;
const HELP_WIDTH = 80;

// Lays out `text` in a column starting at `indent`, after `lead` (on its own line when
// `lead` is too long), wrapping at word boundaries.
function wrap(text: string, indent: number, lead: string): string {
  const lines: string[] = [];
  if (lead.length >= indent) lines.push(lead);
  let line = lead.length < indent ? lead.padEnd(indent) : ' '.repeat(indent);
  for (const word of text.split(' ')) {
    if (line.length + word.length > HELP_WIDTH && line.trim() !== '' && line.length > indent) {
      lines.push(line.trimEnd());
      line = ' '.repeat(indent);
    }
    line += `${word} `;
  }
  lines.push(line.trimEnd());
  return lines.join('\n');
}
