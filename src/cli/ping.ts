import { UsageError } from '../errors.js';
import type { ParsedRun } from './options.js';
import { parseBytes } from './values.js';

// A Healthchecks-style monitoring URL: URL/start when a run's command starts; URL, URL/fail
// or URL/<exit code> when the run ends, with the tail of its output as the body.
export interface PingConfig {
  // Normalised by the URL parser, its query kept, without a fragment.
  readonly url: string;
  readonly exitCode: boolean;
  readonly bodyBytes: number;
}

// Healthchecks keeps the first 100 kB of a ping's body; more would only slow the end ping.
const MAX_PING_BODY = 1024 * 1024;

export function parsePing(str: (key: string) => string | undefined, options: ParsedRun['options']): PingConfig | null {
  const url = str('pingUrl');
  if (url === undefined) {
    if (options.pingExitCode) throw new UsageError('--ping-exit-code applies with --ping-url');
    if (str('pingBodyBytes') !== undefined) throw new UsageError('--ping-body-bytes applies with --ping-url');
    return null;
  }
  return {
    url: parsePingUrl(url),
    exitCode: options.pingExitCode === true,
    bodyBytes: parseBytes(str('pingBodyBytes'), '--ping-body-bytes', 10240, MAX_PING_BODY),
  };
}

// Refused here rather than at the first ping: a URL that can never work is a mistake in the
// crontab line (64), while one that does not answer is the network's (a warning). The URL
// parser would quietly drop a newline or tab, and read `http:host` as `http://host/`.
function parsePingUrl(value: string): string {
  const shown = value.replace(/[\x00-\x1f\x7f]/g, '?');
  if (!/^https?:\/\/[^/?#]/i.test(value)) throw new UsageError(`--ping-url: '${shown}' is not an http:// or https:// URL with a host`);
  if (/[\s\x00-\x1f\x7f]/.test(value)) throw new UsageError(`--ping-url: '${shown}' contains spaces or control characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`--ping-url: '${value}' is not a valid URL`);
  }
  if (url.searchParams.has('rid')) throw new UsageError(`--ping-url: '${value}' has a rid parameter of its own; cronguard adds one per run`);
  url.hash = '';
  return url.href;
}
