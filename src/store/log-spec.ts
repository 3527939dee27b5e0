import type { DatabaseConfig } from './database-config.js';

// The run log of one invocation as the CLI resolved it: the embedded one in the state dir,
// the fleet database's, or none (--no-log).
export type LogSpec = { readonly kind: 'sqlite' } | { readonly kind: 'shared'; readonly db: DatabaseConfig } | { readonly kind: 'none' };

// The fleet's log, shared by every host (its stop requests, its spool and stamps).
export function isShared(log: LogSpec): log is Extract<LogSpec, { kind: 'shared' }> {
  return log.kind === 'shared';
}

// Runs are recorded somewhere (not --no-log).
export function isRecorded(log: LogSpec): boolean {
  return log.kind !== 'none';
}
