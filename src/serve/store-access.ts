import { CronguardError, describe, NotFoundError, UsageError } from '../errors.js';
import type { DatabaseConfig } from '../store/database-config.js';
import { dialectOf } from '../store/dialects.js';
import type { LogPlace } from '../store/log-place.js';
import type { RunStore } from '../store/run-store.js';
import type { SharedStore } from '../store/shared.js';
import { answeredByServer, storeError } from '../store/store-error.js';

// How long a page waits, by default, for the shared log to answer (a statement, or a new
// connection) before it says the log cannot be read: a database that stops answering (a cut
// network) gives a 503 in seconds, and its stuck connection is replaced, not kept. A far
// database, or a machine under heavy load, may need longer (serve --answer-within).
export const ANSWER_MS = 5000;

// The run log could not answer: the pages say so (503) and the server carries on; the next
// request opens it afresh.
export class StoreDown extends Error {}

// The server's one connection to the run log, opened on first use and again after it
// failed, so that a database restart or a network cut ends in a few 503s, not a dead server.
// The embedded log that does not exist yet reads as empty, without being created.
export class StoreAccess {
  private store: RunStore | null = null;
  private opening: Promise<RunStore> | null = null;

  constructor(
    private readonly choice: LogPlace,
    readonly readOnly: boolean,
    private readonly answerMs = ANSWER_MS,
  ) {}

  // Whether the log is shared with other hosts (a stop reaches their runs through it).
  get shared(): boolean {
    return this.choice.db !== null;
  }

  // Where the embedded log (and running jobs' live output) is.
  get stateDir(): string {
    return this.choice.stateDir;
  }

  // fn's answer, or `empty` while there is no log to read. Looking never creates one: a
  // mistyped --schema says so (a 503 naming it), as `status` does.
  async read<T>(fn: (store: RunStore) => Promise<T>, empty: T): Promise<T> {
    try {
      if (!this.store && !this.choice.exists()) return empty;
    } catch (error) {
      throw down(error, this.choice.db);
    }
    return this.use(fn);
  }

  // For requests, pausing and resuming: creates the log if need be (the embedded one when
  // it is opened, the shared one's schema when a statement finds it missing).
  write<T>(fn: (store: RunStore) => Promise<T>): Promise<T> {
    return this.use(async (store) => {
      try {
        return await fn(store);
      } catch (error) {
        if (!(error instanceof NotFoundError) || this.readOnly || !this.choice.db) throw error;
        await store.migrate();
        return fn(store);
      }
    });
  }

  async close(): Promise<void> {
    const store = this.store ?? (await this.opening?.catch(() => null));
    this.store = null;
    await store?.close().catch(() => {});
  }

  private async use<T>(fn: (store: RunStore) => Promise<T>): Promise<T> {
    // A connection known dead (the server restarted while we were idle) is replaced before
    // use, so the first request after a restart already succeeds.
    if (this.store?.connectionLost) await this.drop(this.store);
    let store: RunStore;
    try {
      store = this.store ?? (await this.open());
    } catch (error) {
      throw down(error, this.choice.db);
    }
    try {
      return await fn(store);
    } catch (error) {
      // The store refused what was asked (set_schedule() a zone it does not know): the
      // request's mistake, for the page to say, not an outage.
      if (error instanceof UsageError) throw error;
      const mapped = error instanceof CronguardError ? error : pageError(error, this.choice.db, store.connectionLost);
      if (!store.connectionLost && !mapped) throw error;
      // A statement the server answered with an error leaves its connection sound, and
      // the other pages' statements on it with it; anything else starts afresh.
      if (store.connectionLost || !answeredByServer(error)) await this.drop(store);
      throw new StoreDown(mapped ? mapped.message : describe(error));
    }
  }

  private async drop(store: RunStore): Promise<void> {
    if (this.store === store) this.store = null;
    await store.close().catch(() => {});
  }

  private open(): Promise<RunStore> {
    const deadline = AbortSignal.timeout(this.answerMs);
    this.opening ??= this.choice
      .open(false, this.readOnly, 'cronguard:serve', deadline)
      .then((store) => {
        if (this.choice.db) (store as SharedStore).answerWithin(this.answerMs);
        this.store = store;
        return store;
      })
      .catch((error: unknown) => {
        if (!deadline.aborted) throw error;
        const db = this.choice.db;
        throw new StoreDown(`cannot reach ${db ? `${dialectOf(db).name} at ${db.display}` : 'the run log'}: no answer within ${this.answerMs / 1000} s`);
      })
      .finally(() => {
        this.opening = null;
      });
    return this.opening;
  }
}

function down(error: unknown, db: DatabaseConfig | null): StoreDown {
  if (error instanceof StoreDown) return error;
  if (error instanceof CronguardError) return new StoreDown(error.message);
  const mapped = pageError(error, db);
  return new StoreDown(mapped ? mapped.message : describe(error));
}

// The contract's error for a failure of the log, in its dialect's words; null for a bug.
function pageError(error: unknown, db: DatabaseConfig | null, lost = false): CronguardError | null {
  return db ? dialectOf(db).pageError(error, db, lost) : storeError(error);
}
