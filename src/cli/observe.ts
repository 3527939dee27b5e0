import { resolve } from 'node:path';
import { UsageError } from '../errors.js';
import { parseDuration } from '../util/duration.js';
import type { Setting } from '../util/setting.js';

// How long the run log keeps finished runs unless a setting says otherwise.
export const DEFAULT_RETENTION_MS = 90 * 86_400_000;

// What a run leaves for observers besides its row: the Prometheus textfile, and how long
// its log keeps runs (the automatic prune). `log`: whether there is a run log at all.
export function observing(retention: Setting | undefined, metricsDir: Setting | undefined, log: boolean) {
  if (metricsDir && !log) throw new UsageError(`${metricsDir.from}: the metrics come from the run log, which --no-log turns off`);
  return {
    retentionMs: retentionOf(retention),
    metricsDir: metricsDir ? resolve(metricsDir.value) : null,
  };
}

// `off` (or 0) keeps everything; otherwise a DURATION of at least a day, since runs only
// prune about once a day anyway.
function retentionOf(setting: Setting | undefined): number | null {
  if (!setting) return DEFAULT_RETENTION_MS;
  if (setting.value === 'off' || setting.value === '0') return null;
  const ms = parseDuration(setting.value, setting.from);
  if (ms < 86_400_000) throw new UsageError(`${setting.from}: '${setting.value}' is under a day; keep at least 1d, or 'off'`);
  return ms;
}
