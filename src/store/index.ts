import type { RunStore } from './types.js';

// Opens the configured run log. Only the embedded SQLite store exists so far; it is loaded
// on first use so that --no-log runs never pay for it.
export async function openStore(stateDir: string): Promise<RunStore> {
  const { SqliteStore } = await import('./sqlite.js');
  return SqliteStore.open(stateDir);
}

export type { RunStore };
