import { UsageError } from '../errors.js';

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y;

// Parses the contract's DURATION (`500ms`, `10s`, `1h30m`, bare number = seconds) into
// milliseconds. `option` names the flag in the error so the user knows which one to fix.
export function parseDuration(text: string, option: string): number {
  const bad = () =>
    new UsageError(
      `${option}: invalid duration '${text}' (use e.g. 500ms, 10s, 5m, 2h, 1d, 1h30m or a number of seconds)`,
    );
  if (text === '') throw bad();
  const total = /^\d+(\.\d+)?$/.test(text) ? Number(text) * 1000 : sumParts(text, bad);
  const ms = Math.round(total);
  if (ms === 0 && total > 0) throw new UsageError(`${option}: '${text}' is shorter than the smallest duration, 1ms`);
  if (!(ms <= MAX_DURATION_MS)) throw new UsageError(`${option}: '${text}' is longer than ${MAX_DURATION_MS / 86_400_000}d`);
  return ms;
}

// Ten years: long enough for any real timeout or wait, short enough to stay exact.
const MAX_DURATION_MS = 3650 * 86_400_000;

function sumParts(text: string, bad: () => UsageError): number {
  let total = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < text.length) {
    const start = PART.lastIndex;
    const match = PART.exec(text);
    if (!match || match.index !== start) throw bad();
    total += Number(match[1]) * (UNIT_MS[match[2] as string] as number);
  }
  return total;
}

// Renders milliseconds compactly for tables and messages: 850ms, 12.3s, 4m05s, 2h10m.
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toFixed(ms < 10_000 ? 2 : 1))}s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  const m = Math.round(s / 60);
  if (m < 1440) return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(m / 1440)}d${String(Math.floor((m % 1440) / 60)).padStart(2, '0')}h`;
}
