import type { SharedLog, SharedStore } from './shared.js';
import type { Spool } from './spool.js';

// Opening a run's shared log in the fleet's database, as both server dialects do: on the
// lock's session when there is one, else a session of its own; records that cannot reach
// it go to the spool. Each dialect says how it connects and makes its store.
export interface SharedLogParts<S extends { answerWithin(ms: number): void }> {
  readonly spool: Spool;
  // The lock's session, which the log shares; null: one of its own.
  readonly session: S | null;
  connect(abort?: AbortSignal): Promise<S>;
  // The store's code, loading while the connection is made.
  readonly code: Promise<unknown>;
  // The store on a session that reached the server.
  open(reached: S): Promise<SharedStore>;
  // How long a reconnection made to record (after the first session was lost) may take,
  // and then leave a statement unanswered, before the record goes to the spool: longer than
  // the server's own bound on the log's lock waits, so that a write it cancels cannot commit
  // after it was spooled.
  readonly recordGiveUpMs: number;
  // Where the log is, for messages, given the store if it opened.
  where(store: SharedStore | null): string;
  // A failure of the store is a missing privilege.
  denied(error: unknown): boolean;
  readonly abort?: AbortSignal;
}

export async function openSharedLog<S extends { answerWithin(ms: number): void }>(parts: SharedLogParts<S>): Promise<SharedLog> {
  const { spool, abort, recordGiveUpMs } = parts;
  let store: SharedStore | null = null;
  let openError: unknown = null;
  try {
    const [reached] = await Promise.all([parts.session ?? parts.connect(abort), parts.code]);
    store = await parts.open(reached);
  } catch (error) {
    if (abort?.aborted) throw error;
    openError = error;
  }
  // After the first session was lost, a record gives up within seconds and goes to the
  // spool, rather than waiting out a connect timeout or the 30 s a statement may take (a
  // pooler that accepted the connection but has no server behind it answers nothing).
  const reopen = async (signal?: AbortSignal) => {
    const limit = AbortSignal.timeout(recordGiveUpMs);
    const reopened = await parts.connect(signal ? AbortSignal.any([signal, limit]) : limit).catch((error) => {
      throw limit.aborted && !signal?.aborted ? new Error(`no session within ${recordGiveUpMs / 1000} s`) : error;
    });
    reopened.answerWithin(recordGiveUpMs);
    return parts.open(reopened);
  };
  return { store, parts: { store, spool, reopen, openError, where: parts.where(store), denied: parts.denied } };
}
