import { UsageError } from '../errors.js';
import { formatDuration } from '../util/duration.js';
import type { ParsedRun } from './options.js';
import { optionalDuration } from './values.js';

// The opt-in rules that fail a run whose command exited 0 (see run/outcome.ts byRules):
// --min-duration (a backup that "succeeds" in 2 s did not back anything up) and
// --fail-on-stderr (cronic's rule: a script that complains did not go well).
export function outcomeRules(
  str: (key: string) => string | undefined,
  options: ParsedRun['options'],
  env: Readonly<Record<string, string | undefined>>,
  timeoutMs: number | null,
) {
  // 0 means no minimum, as --timeout 0 means no timeout.
  const minDurationMs = optionalDuration(str('minDuration'), '--min-duration');
  if (minDurationMs !== null && timeoutMs !== null && minDurationMs >= timeoutMs) {
    throw new UsageError(
      `--min-duration ${formatDuration(minDurationMs)} is not shorter than --timeout ${formatDuration(timeoutMs)}: no run could succeed`,
    );
  }
  return {
    minDurationMs,
    // The trace prefix is PS4 as the command will see it: cronguard passes its environment on
    // (a PS4 in --env-file's file takes its place; see run/attempts.ts).
    failOnStderr: options.failOnStderr === true ? Object.freeze({ ps4: env.PS4 ?? '+ ' }) : null,
  };
}
