import { SqliteStore } from './sqlite.js';
import type { RunStore } from './types.js';

// Opens the configured run log. Only the embedded SQLite store exists so far.
export async function openStore(stateDir: string): Promise<RunStore> {
  return SqliteStore.open(stateDir);
}

export type { RunStore };
