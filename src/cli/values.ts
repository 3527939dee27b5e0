import { constants } from 'node:os';
import { UsageError } from '../errors.js';
import { parseDuration } from '../util/duration.js';

// Parsers of single option values: each returns the value or throws one line (64) naming
// the option and what it takes.

// A timeout of 0 means "no timeout", as with timeout(1).
export function optionalDuration(value: string | undefined, option: string): number | null {
  if (value === undefined) return null;
  const ms = parseDuration(value, option);
  return ms === 0 ? null : ms;
}

export function parseExitCode(value: string | undefined): number {
  if (value === undefined) return 0;
  if (!/^\d+$/.test(value) || Number(value) > 255) {
    throw new UsageError(`--conflict-exit-code: '${value}' is not an exit code (0-255)`);
  }
  return Number(value);
}

export function parseSignal(value: string, option = '--kill-signal'): NodeJS.Signals {
  const signals = constants.signals as Record<string, number>;
  const upper = value.toUpperCase();
  const name = /^\d+$/.test(value)
    ? Object.keys(signals).find((s) => signals[s] === Number(value))
    : upper.startsWith('SIG') ? upper : `SIG${upper}`;
  if (!name || !(name in signals)) {
    throw new UsageError(`${option}: unknown signal '${value}' (use e.g. TERM, INT, HUP, KILL or a number)`);
  }
  return name as NodeJS.Signals;
}

export function parseBytes(value: string | undefined, option: string, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  const match = /^(\d+)([kKmM])?(i?B)?$/.exec(value);
  const bytes = match ? Number(match[1]) * (match[2] ? (/[kK]/.test(match[2]) ? 1024 : 1048576) : 1) : NaN;
  if (!(bytes <= max)) {
    const most = max >= 1048576 ? `${max / 1048576}M` : `${max / 1024}k`;
    throw new UsageError(`${option}: '${value}' is not a byte count from 0 to ${most} (e.g. ${fallback}, 64k, 1M)`);
  }
  return bytes;
}
