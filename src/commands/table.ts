import { Chalk, type ChalkInstance } from 'chalk';
import type { RunRow, RunStatus } from '../store/types.js';

// chalk honours FORCE_COLOR and whether stdout is a terminal; NO_COLOR (no-color.org) is
// added here, with an explicit FORCE_COLOR taking precedence.
export function colours(env: NodeJS.ProcessEnv = process.env): ChalkInstance {
  const noColour = env.FORCE_COLOR === undefined && !!env.NO_COLOR;
  return noColour ? new Chalk({ level: 0 }) : new Chalk();
}

export function paintStatus(c: ChalkInstance, status: RunStatus | string): string {
  switch (status) {
    case 'succeeded':
      return c.green(status);
    case 'running':
      return c.cyan(status);
    case 'abandoned':
    case 'disabled':
      return c.yellow(status);
    default:
      return c.red(status);
  }
}

// Times shown in tables: UTC, to the second, without the ISO noise.
export function shortTime(iso: string | null): string {
  return iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}Z` : '-';
}

// Lays out rows as aligned columns. Widths are measured without colour codes.
export function renderTable(headers: readonly string[], rows: readonly (readonly string[])[], c: ChalkInstance): string {
  const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => plain(r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell + ' '.repeat((widths[i] as number) - plain(cell).length)))
      .join('  ')
      .trimEnd();
  return `${[c.bold(line(headers)), ...rows.map(line)].join('\n')}\n`;
}

export function runCells(run: RunRow, c: ChalkInstance, formatDuration: (ms: number) => string): string[] {
  return [
    String(run.id),
    run.job,
    paintStatus(c, run.status),
    run.trigger,
    shortTime(run.started_at),
    run.duration_ms === null ? '-' : formatDuration(run.duration_ms),
    run.exit_code === null ? (run.signal ?? '-') : String(run.exit_code),
    String(run.overlaps),
    run.host,
  ];
}

export const RUN_HEADERS = ['ID', 'JOB', 'STATUS', 'TRIGGER', 'STARTED', 'DURATION', 'EXIT', 'SKIPS', 'HOST'];
