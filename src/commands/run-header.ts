import type { ChalkInstance } from 'chalk';
import type { RunRow } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import { localTime } from '../util/time.js';
import { paintStatus } from './table.js';

// What `logs` shows above a run's output on a terminal: which run this is and how it went,
// in this host's time zone. Never when piped: then stdout is the output, byte for byte.
export function runHeader(run: RunRow, c: ChalkInstance, now = Date.now()): string {
  const attempt = run.attempt > 1 ? `, attempt ${run.attempt}` : '';
  const lines: [string, string][] = [
    ['Run', `${run.id} (${run.trigger}${attempt})`],
    ['Job', run.job],
    ['Host', `${run.host} (pid ${run.pid})`],
    ['Status', `${paintStatus(c, run.status)}${exitOf(run)}`],
    ['Started', localTime(run.started_at)],
    ['Duration', durationOf(run, now)],
  ];
  if (run.error) lines.push(['Note', run.error]);
  return `${lines.map(([label, value]) => `${c.dim(`${label}:`.padEnd(10))}${value}`).join('\n')}\n\n`;
}

// How a run ended, for the one line `logs -f` ends with: "failed, exit 3, after 2.1s".
export function ending(run: RunRow): string {
  if (run.status === 'running') return 'still running';
  const after = run.duration_ms === null ? '' : `, after ${formatDuration(run.duration_ms)}`;
  return `${run.status}${exitOf(run)}${after}`;
}

function exitOf(run: RunRow): string {
  if (run.exit_code !== null) return `, exit ${run.exit_code}`;
  return run.signal ? `, ${run.signal}` : '';
}

// A running run's duration is the time since it started, as far as this host's clock says.
function durationOf(run: RunRow, now: number): string {
  if (run.duration_ms !== null) return formatDuration(run.duration_ms);
  if (run.status !== 'running') return '-';
  return `${formatDuration(Math.max(0, now - Date.parse(run.started_at)))} so far`;
}
