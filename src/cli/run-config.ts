import type { LockSpec } from '../lock/lock-spec.js';
import type { DatabaseConfig } from '../store/database-config.js';
import type { LogSpec } from '../store/log-spec.js';
import type { NotifyConfig } from './notify.js';
import type { PingConfig } from './ping.js';
import type { SyslogConfig } from './syslog.js';

// The frozen configuration of one `run` invocation, as config.ts resolves it.

// Everything one `run` invocation needs, resolved once (flag over environment over default)
// and frozen; nothing below the CLI reads argv or the environment again.
export interface RunConfig {
  readonly name: string;
  readonly argv: readonly string[];
  readonly display: string;
  readonly lock: LockSpec<DatabaseConfig>;
  // --max-running: how many copies may run at once, each in a slot of the lock (lock/slots.ts).
  readonly maxRunning: number;
  // The embedded run log's directory, also where the spool of the shared log lives.
  readonly stateDir: string;
  readonly log: LogSpec;
  readonly onLockLoss: 'terminate' | 'continue';
  readonly waitMs: number;
  readonly conflictExitCode: number;
  readonly timeoutMs: number | null;
  readonly killSignal: NodeJS.Signals;
  readonly killAfterMs: number;
  readonly quiet: boolean;
  readonly captureBytes: number;
  // Opt-in rules that fail a run exiting 0 (see run/outcome.ts): shorter than this; with
  // output on stderr other than a shell's trace lines (PS4 tells them).
  readonly minDurationMs: number | null;
  readonly failOnStderr: { readonly ps4: string } | null;
  // Fleet rule off: run even when another host already ran this job in this minute.
  readonly everyTick: boolean;
  // --replace: stop the job's running copy first (see run/stop/replace.ts).
  readonly replace: boolean;
  readonly minIntervalMs: number | null;
  readonly onRequest: boolean;
  // --scheduled: the job's stored schedule says when it is due.
  readonly scheduled: boolean;
  readonly batch: boolean;
  readonly batchMax: number | null;
  readonly retries: number;
  readonly retryDelayMs: number;
  readonly retryOnTimeout: boolean;
  // --every with --for: start every everyMs until forMs has passed; --on-request --for:
  // serve requests until then. null: one run.
  readonly everyMs: number | null;
  readonly forMs: number | null;
  readonly jitterMs: number;
  // Finished runs older than this are pruned, about once a day; null: kept for ever.
  readonly retentionMs: number | null;
  // Where the run rewrites its Prometheus textfile; null: nowhere.
  readonly metricsDir: string | null;
  // --ping-url: where each run's start and end are reported; null: nowhere.
  readonly ping: PingConfig | null;
  // --notify, --notify-url: alerts once per incident; null: none.
  readonly notify: NotifyConfig | null;
  // --env-file: the file of the command's variables; null: none.
  readonly envFile: string | null;
  // --redact and the configuration's redact lines, compiled (global).
  readonly redact: readonly RegExp[];
  // --record-command off: the run log gets RECORD_OFF instead of the command line.
  readonly recordCommand: boolean;
  // --syslog: a line per run's start and end to the local syslog socket; null: none.
  readonly syslog: SyslogConfig | null;
  readonly verbose: boolean;
  // Settings left out (a bad notifier of the configuration file's): said on every run.
  readonly warnings: readonly string[];
  // Where each location setting came from, for -v.
  readonly sources: readonly string[];
}
