import type { RunConfig } from '../cli/config.js';
import type { LockBackend } from '../lock/backend.js';
import { openLockBackend } from '../lock/index.js';
import { connectPostgres, openPostgresStore, openSqliteStore } from '../store/index.js';
import type { PostgresStore } from '../store/postgres.js';
import type { NewRun, RunStore } from '../store/types.js';
import type { Messages } from '../util/io.js';
import { RunRecorder } from './recorder.js';

export interface Wiring {
  readonly backend: LockBackend;
  readonly recorder: RunRecorder;
  // Round trips to PostgreSQL so far, for --verbose (0 without a database).
  roundTrips(): number;
  close(): Promise<void>;
}

// Puts together the lock backend and the run log the configuration asks for. With the
// postgres lock and the shared log, both use one session, and one statement takes the
// lock and records the run.
export async function wire(config: RunConfig, run: NewRun, say: Messages): Promise<Wiring> {
  if (config.lock !== 'postgres' && config.log !== 'postgres') {
    const backend = await openLockBackend(config);
    let store: RunStore | null = null;
    let openError: unknown = null;
    if (config.log === 'sqlite') {
      try {
        store = await openSqliteStore(config.stateDir);
      } catch (error) {
        openError = error;
      }
    }
    const recorder = new RunRecorder({ store, spool: null, reopen: null, openError, where: `in ${config.stateDir}` }, say);
    return { backend, recorder, roundTrips: () => 0, close: () => recorder.close() };
  }
  return wirePostgres(config, run, say);
}

async function wirePostgres(config: RunConfig, run: NewRun, say: Messages): Promise<Wiring> {
  const db = config.db as NonNullable<RunConfig['db']>;
  const { Spool } = await import('../store/spool.js');
  const connect = () => connectPostgres(db, `cronguard:${config.name}`);
  const logged = config.log === 'postgres';
  // The lock needs its connection: without it nothing runs (69). The log alone can wait.
  const lockSession = config.lock === 'postgres' ? await connect() : null;
  let store: PostgresStore | null = null;
  let openError: unknown = null;
  if (logged) {
    try {
      store = await openPostgresStore(lockSession ?? (await connect()), db.schema);
    } catch (error) {
      openError = error;
    }
  }
  const recorder = new RunRecorder(
    {
      store,
      spool: logged ? new Spool(config.stateDir) : null,
      reopen: logged ? async () => openPostgresStore(await connect(), db.schema) : null,
      openError,
      where: `${db.display} (schema ${db.schema})`,
    },
    say,
  );
  let backend: LockBackend;
  if (lockSession) {
    const { postgresBackend } = await import('../lock/postgres.js');
    const key = config.lockKey as bigint;
    const combined = store
      ? async () => {
          const id = await (store as PostgresStore).lockAndStart(run, key, config.waitMs === 0);
          if (id !== null) recorder.adopt(run, id);
          else if (config.waitMs === 0) recorder.overlapAlreadyCounted();
          return id !== null;
        }
      : undefined;
    backend = postgresBackend(lockSession, key, combined);
  } else {
    backend = await openLockBackend(config);
  }
  const sessions = () => [lockSession, store?.session].filter((s, i, all) => s && all.indexOf(s) === i);
  return {
    backend,
    recorder,
    roundTrips: () => sessions().reduce((n, s) => n + (s?.roundTrips ?? 0), 0),
    close: async () => {
      await recorder.close();
      await lockSession?.close();
    },
  };
}
