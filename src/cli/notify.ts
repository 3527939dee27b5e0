import { UsageError } from '../errors.js';
import { parseDuration } from '../util/duration.js';
import { addSecretsOf } from '../util/redact.js';
import type { Setting } from './settings.js';

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

// `noLog`: --no-log, whose runs have no log to keep a streak in (see README, "Alerts
// without mail"): a notifier asked for on the same command line is a contradiction (64);
// one from the environment or a configuration file notifies of every failure.
export function parseNotify(command: Setting | undefined, url: Setting | undefined, timeout: string | undefined, noLog: boolean): NotifyConfig | null {
  const ms = timeout === undefined ? DEFAULT_TIMEOUT_MS : parseDuration(timeout, '--notify-timeout');
  if (ms === 0 || ms > MAX_TIMEOUT_MS) throw new UsageError(`--notify-timeout: '${timeout}' is not between 1ms and 1h`);
  // A crontab line's --notify-timeout may bound a notifier of the configuration file's: one
  // taken out of the file, or unset for a job by an empty variable, leaves it nothing to
  // bound, and must not stop every job that set it from running.
  if (!command && !url) return null;
  for (const given of [command, url]) {
    if (noLog && given?.from.startsWith('--')) {
      throw new UsageError(`${given.from} notifies once per incident, which the run log remembers; it cannot go with --no-log`);
    }
  }
  if (command?.value.trim() === '') throw new UsageError(`${command.from} needs a shell command`);
  const origin = `notifiers: ${[command && originOf('--notify', command), url && originOf('--notify-url', url)].filter(Boolean).join(', ')}`;
  return { command: command?.value ?? null, url: url ? parseNotifyUrl(url) : null, timeoutMs: ms, origin };
}

function originOf(flag: string, { from }: Setting): string {
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
