import type { SharedSession } from '../shared.js';
import type { MysqlConfig } from './config.js';

// Asks, over the session, whether its lock is still held; returns why not, or null.
export type MysqlLockProbe = (ask: <R>(sql: string, params: readonly unknown[]) => Promise<R[]>) => Promise<string | null>;

export interface Changed {
  readonly affectedRows: number;
  // The AUTO_INCREMENT value the statement generated (0: none).
  readonly insertId: number;
}

// One statement of a batch, and its `?` values.
export type Statement = readonly [sql: string, params: readonly unknown[]];

// What one statement of a batch returned: a SELECT its rows, a write its header.
export interface Answer extends Changed {
  readonly rows: readonly unknown[];
}

// The statements cronguard sends through a session, whatever holds it (the lock, the log).
export interface MysqlSession extends SharedSession {
  readonly config: MysqlConfig;
  // The server's CONNECTION_ID() for this session: what GET_LOCK's IS_USED_LOCK names.
  readonly connectionId: number;
  // The server's max_allowed_packet, in bytes.
  readonly maxPacketBytes: number;
  // Why the connection is gone (killed, cut, closed), or null while it lives.
  readonly lost: string | null;
  query<R>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  execute(sql: string, params?: readonly unknown[]): Promise<Changed>;
  transaction<T>(fn: (session: MysqlSession) => Promise<T>): Promise<T>;
  // `fn`, whose first statement goes at once, after the transaction under way (if any) ends.
  outside<T>(fn: () => Promise<T>): Promise<T>;
  // Several statements in one round trip (see Session.batch, batchedTransaction).
  batch(statements: readonly Statement[]): Promise<Answer[]>;
  batchedTransaction<T>(fn: (attempt: number) => Promise<T>): Promise<T>;
  // Starts the heartbeat; `onLost` hears when the connection, or with a probe the lock, is gone.
  watch(onLost: (reason: string) => void): void;
  holdsLock(probe: MysqlLockProbe): void;
  // How long ago the last heartbeat that proved the lock was sent, and a call after each one
  // from now on (returns what stops it): the command's watchdog counts on them (lock.ts).
  sinceBeatMs(): number;
  onBeat(beat: () => void): () => void;
  // The longest time between two proofs of the lock (the last one and now included) since
  // `resetSilence`: a wrapper stopped or starved that long had its command ended by the watchdog.
  longestSilenceMs(): number;
  resetSilence(): void;
  // The lock counts as lost from now on (its holders hear, as from the heartbeat).
  giveUpLock(reason: string): void;
  // Asks the server now whether the lock is still held; a loss goes to watch's handlers.
  confirmLock(): Promise<void>;
  // From now on, a statement left unanswered this long (the server silent meanwhile) ends
  // the session (the web page's bound; a record's after a reconnection).
  answerWithin(ms: number): void;
  close(): Promise<void>;
  destroy(): void;
  // A session lost while it held no lock takes the connection of `fresh` (see Session.adopt).
  adopt(fresh: MysqlSession): void;
}
