import { join } from 'node:path';
import type { RunConfig } from '../../cli/config.js';
import { openSqliteStore } from '../../store/index.js';
import type { RunStore } from '../../store/run-store.js';
import type { SchemaMemory, SharedDatabase, SharedLog, SharedSession } from '../../store/shared.js';
import type { Messages } from '../../util/io.js';
import { touch, touchedSince, unlinkQuietly } from '../../util/stamp.js';
import { logTarget } from '../housekeeping.js';
import { RunRecorder } from '../recorder.js';

// The run log of an invocation, as gate.ts opens it: the embedded one, or the shared one
// in the fleet's database (its spool and reconnection are the dialect's, see store/shared.ts).

export async function sqliteLog(config: RunConfig, say: Messages): Promise<RunRecorder> {
  let store: RunStore | null = null;
  let openError: unknown = null;
  if (config.log.kind === 'sqlite') {
    try {
      store = await openSqliteStore(config.stateDir);
    } catch (error) {
      openError = error;
    }
  }
  return new RunRecorder({ store, spool: null, reopen: null, openError, where: `in ${config.stateDir}` }, say, needed(config));
}

export interface OpenedLog {
  readonly recorder: RunRecorder;
  // The shared log's store, which can take a database lock; null without one.
  readonly store: SharedLog['store'];
}

// The shared log, on the lock's session when there is one.
export async function sharedLog(config: RunConfig, say: Messages, database: SharedDatabase, session: SharedSession | null, abort?: AbortSignal): Promise<OpenedLog> {
  const log = await database.openLog(session, (version) => schemaMemory(config, version), abort);
  return { store: log.store, recorder: new RunRecorder(log.parts, say, needed(config)) };
}

// Why a run cannot start unless its log answers its admission.
function needed(config: RunConfig): string | null {
  return config.scheduled ? `--scheduled cannot tell whether ${config.name} is due` : null;
}

// The schema stamp: a file in the state dir whose name carries the schema version this code
// needs, touched once this host found the schema at it. An upgraded cronguard asks again.
function schemaMemory(config: RunConfig, version: number): SchemaMemory {
  const file = join(config.stateDir, `schema-${logTarget(config)}-v${version}.stamp`);
  return {
    current: touchedSince(file, 0),
    remember: () => touch(config.stateDir, file, Date.now()),
    forget: () => unlinkQuietly(file),
  };
}
