import { join } from 'node:path';
import type { RunConfig } from '../../cli/config.js';
import { fleetDatabase } from '../../store/fleet-database.js';
import { openSqliteStore } from '../../store/index.js';
import type { LogSpec } from '../../store/log-spec.js';
import type { RunStore } from '../../store/run-store.js';
import type { SchemaMemory, SharedDatabase, SharedLog, SharedSession } from '../../store/shared.js';
import type { Messages } from '../../util/io.js';
import { touch, touchedSince, unlinkQuietly } from '../../util/stamp.js';
import { logTarget } from '../housekeeping.js';
import { RunRecorder } from '../recorder.js';

// The run log of an invocation, as the gate opens it, by a table keyed by the log's kind: the
// embedded one in the state dir, the fleet database's (its spool and reconnection are the
// dialect's, see store/shared.ts), or none (--no-log).

export interface OpenedLog {
  readonly recorder: RunRecorder;
  // The shared log's store, which can take a database lock; null without one.
  readonly store: SharedLog['store'] | null;
  // The fleet's database the invocation uses, for its lock or its log; null: none.
  readonly database: SharedDatabase | null;
}

// What the gate already has: the database of a lock that lives there, with the lock's own
// session (the advisory lock, GET_LOCK), which the shared log then uses too.
export interface LogBeside {
  readonly database: SharedDatabase | null;
  readonly session: SharedSession | null;
  readonly abort?: AbortSignal;
}

type LogOpener<K extends LogSpec['kind']> = (config: RunConfig, log: Extract<LogSpec, { kind: K }>, say: Messages, beside: LogBeside) => Promise<OpenedLog>;

const LOGS: { readonly [K in LogSpec['kind']]: LogOpener<K> } = {
  sqlite: embeddedLog,
  shared: fleetLog,
  none: async (config, _log, say, beside) => ({ recorder: new RunRecorder(storeless(config, null), say, needed(config)), store: null, database: beside.database }),
};

export function openLog(config: RunConfig, say: Messages, beside: LogBeside): Promise<OpenedLog> {
  // The table's entry for this kind takes this kind's spec; TypeScript cannot pair the two.
  return (LOGS[config.log.kind] as LogOpener<LogSpec['kind']>)(config, config.log, say, beside);
}

async function embeddedLog(config: RunConfig, _log: LogSpec, say: Messages, beside: LogBeside): Promise<OpenedLog> {
  let store: RunStore | null = null;
  let openError: unknown = null;
  try {
    store = await openSqliteStore(config.stateDir);
  } catch (error) {
    openError = error;
  }
  return { recorder: new RunRecorder({ ...storeless(config, openError), store }, say, needed(config)), store: null, database: beside.database };
}

function storeless(config: RunConfig, openError: unknown) {
  return { store: null, spool: null, reopen: null, openError, where: `in ${config.stateDir}` };
}

// The shared log, on the lock's session when there is one.
async function fleetLog(config: RunConfig, log: Extract<LogSpec, { kind: 'shared' }>, say: Messages, beside: LogBeside): Promise<OpenedLog> {
  const database = beside.database ?? (await fleetDatabase(config, log.db, say));
  const opened = await database.openLog(beside.session, (version) => schemaMemory(config, version), beside.abort);
  return { store: opened.store, recorder: new RunRecorder(opened.parts, say, needed(config)), database };
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
