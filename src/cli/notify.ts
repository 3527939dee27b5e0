import { UsageError } from '../errors.js';
import { parseDuration } from '../util/duration.js';
import { addSecretsOf } from '../util/redact.js';
import type { Setting } from '../util/setting.js';

// Alerts without cron mail (--notify, --notify-url): on the first failure of a streak and on
// the first success after it, a command runs and/or a URL gets a JSON POST.
export interface NotifyConfig {
  // Run through /bin/sh -c; null: none.
  readonly command: string | null;
  // An http:// or https:// URL, normalised, without a fragment; null: none.
  readonly url: string | null;
  // How long each notifier may take; the command's process group is then killed.
  readonly timeoutMs: number;
  // Where each came from, for -v: a notifier every job of a host runs (a configuration
  // file's) is found by it.
  readonly origin: string;
}

const DEFAULT_TIMEOUT_MS = 30_000;
// A notifier holds up the end of the invocation (and the next cron run's lock, with a
// shared lock): an hour is already more than anyone should want.
const MAX_TIMEOUT_MS = 3_600_000;

// `noLog`: --no-log, whose runs have no log to keep a streak in (see docs/alerts.md, "Alerts
// without mail"): a notifier asked for on the same command line is a contradiction (64);
// one from the environment or a configuration file notifies of every failure.
// `warn`: hears why a notifier from the environment or a configuration file is left out.
export function parseNotify(given: { command?: Setting; url?: Setting }, timeout: string | undefined, noLog: boolean, warn: (line: string) => void): NotifyConfig | null {
  const ms = timeout === undefined ? DEFAULT_TIMEOUT_MS : parseDuration(timeout, '--notify-timeout');
  if (ms === 0 || ms > MAX_TIMEOUT_MS) throw new UsageError(`--notify-timeout: '${timeout}' is not between 1ms and 1h`);
  for (const setting of [given.command, given.url]) {
    if (noLog && setting?.from.startsWith('--')) {
      throw new UsageError(`${setting.from} notifies once per incident, which the run log remembers; it cannot go with --no-log`);
    }
  }
  const command = fleetWide(given.command, (c) => (c.value.trim() === '' ? fail(`${c.from} needs a shell command`) : c.value), warn);
  const url = fleetWide(given.url, parseNotifyUrl, warn);
  // A crontab line's --notify-timeout may bound a notifier of the configuration file's: one
  // taken out of the file, or unset for a job by an empty variable, leaves it nothing to
  // bound, and must not stop every job that set it from running.
  if (command === null && url === null) return null;
  const origin = `notifiers: ${[command && originOf('--notify', given.command), url && originOf('--notify-url', given.url)].filter(Boolean).join(', ')}`;
  return { command, url, timeoutMs: ms, origin };
}

// A bad notifier on the command line is that line's mistake (64, nothing run). One from the
// environment or a configuration file is every job's: refusing would stop every job of the
// host (a typo pushed to /etc/cronguard.conf, and no cron job runs), so it is left out, with
// a line on every run saying why, and the job runs.
function fleetWide(setting: Setting | undefined, parse: (s: Setting) => string, warn: (line: string) => void): string | null {
  if (setting === undefined) return null;
  try {
    return parse(setting);
  } catch (error) {
    if (!(error instanceof UsageError) || setting.from.startsWith('--')) throw error;
    warn(`${error.message}; the job runs without this notifier`);
    return null;
  }
}

function fail(message: string): never {
  throw new UsageError(message);
}

function originOf(flag: string, setting: Setting | undefined): string {
  const from = setting?.from ?? flag;
  return from.startsWith('--') ? flag : `${flag} (${from})`;
}

// Refused when given, like --ping-url: a URL that can never work is a mistake in the
// crontab line or the configuration file (64), found before anything runs, not at the first
// failure, when the alert is needed.
function parseNotifyUrl({ value, from }: Setting): string {
  addSecretsOf(value);
  const shown = value.replace(/[\x00-\x1f\x7f]/g, '?');
  if (!/^https?:\/\/[^/?#]/i.test(value)) throw new UsageError(`${from}: '${shown}' is not an http:// or https:// URL with a host`);
  if (/[\s\x00-\x1f\x7f]/.test(value)) throw new UsageError(`${from}: '${shown}' contains spaces or control characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`${from}: '${shown}' is not a valid URL`);
  }
  url.hash = '';
  return url.href;
}
