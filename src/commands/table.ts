import { Chalk, type ChalkInstance } from 'chalk';
import { clip, printable, tableTime } from '../present/format.js';
import type { RunRow, RunStatus } from '../store/types.js';
import { formatDuration } from '../util/duration.js';

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

const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');
// Whatever a cell holds besides the colours set here is shown escaped (see printable): a
// value that missed its printable() still cannot reach the terminal raw.
const SGR = /(\x1b\[[0-9;]*m)/;
const safeCell = (cell: string) => cell.split(SGR).map((part, i) => (i % 2 === 1 ? part : printable(part))).join('');

export interface Fit {
  // Columns left out whatever the width (say, with nothing in them).
  readonly hide?: readonly number[];
  // The width to fit in.
  readonly width: number;
  // Columns to leave out, in this order, while the table is too wide.
  readonly drop?: readonly number[];
  // A plain-text column to shorten (with …) if that is still not enough.
  readonly shrink?: number;
}

// Lays out rows as aligned columns; widths are measured without colour codes. With `fit`,
// columns are dropped and one shortened until the table fits the width.
export function renderTable(headers: readonly string[], rows: readonly (readonly string[])[], c: ChalkInstance, fit?: Fit): string {
  let keep = headers.map((_, i) => i).filter((i) => !fit?.hide?.includes(i));
  const width = fit?.width ?? Number.POSITIVE_INFINITY;
  let cells = rows.map((r) => keep.map((i) => safeCell(r[i] ?? '')));
  // The shrinkable column gives way first, down to a readable width; then columns go; then
  // it gives way again, down to a stub.
  const shrink = (min: number) => {
    const at = fit?.shrink === undefined ? -1 : keep.indexOf(fit.shrink);
    if (at < 0 || total() <= width) return;
    const room = Math.max(min, (widths()[at] as number) - (total() - width));
    cells = cells.map((r) => r.map((cell, i) => (i === at ? clip(cell, room) : cell)));
  };
  const widths = () => keep.map((_, k) => Math.max((headers[keep[k] as number] as string).length, ...cells.map((r) => plain(r[k] ?? '').length)));
  const total = () => widths().reduce((a, b) => a + b, 0) + 2 * (keep.length - 1);
  shrink(24);
  for (const column of fit?.drop ?? []) {
    if (total() <= width) break;
    const at = keep.indexOf(column);
    if (at < 0) continue;
    keep = keep.filter((i) => i !== column);
    cells = cells.map((r) => r.filter((_, k) => k !== at));
  }
  shrink(8);
  const head = keep.map((i) => headers[i] as string);
  const w = head.map((h, i) => Math.max(h.length, ...cells.map((r) => plain(r[i] as string).length)));
  const line = (row: readonly string[]) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell + ' '.repeat((w[i] as number) - plain(cell).length)))
      .join('  ')
      .trimEnd();
  return `${[c.bold(line(head)), ...cells.map(line)].join('\n')}\n`;
}

// One run as a row of history: running runs show how long they have run so far (+).
export function runCells(run: RunRow, c: ChalkInstance, now: number): string[] {
  const ran = run.duration_ms ?? (run.status === 'running' ? now - Date.parse(run.started_at) : null);
  return [
    String(run.id),
    printable(run.job),
    paintStatus(c, printable(run.status)),
    printable(run.trigger),
    tableTime(run.started_at),
    ran === null ? '-' : `${formatDuration(ran)}${run.status === 'running' ? '+' : ''}`,
    run.exit_code === null ? (run.signal ?? '-') : String(run.exit_code),
    String(run.overlaps),
    printable(run.host),
    String(run.slot ?? 0),
    printable(run.command),
  ];
}

export const RUN_HEADERS = ['ID', 'JOB', 'STATUS', 'TRIGGER', 'STARTED', 'DURATION', 'EXIT', 'SKIPS', 'HOST', 'SLOT', 'COMMAND'];
