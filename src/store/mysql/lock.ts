import type { Lock, LockBackend } from '../../lock/backend.js';
import { retryUntil } from '../../lock/backend.js';
import type { Messages } from '../../util/io.js';
import type { DatabaseLock } from '../shared.js';
import type { LockRelease, LockRequest } from '../types.js';
import { mysqlError, readOnlyServer } from './errors.js';
import type { MysqlSession } from './session.js';
import { LOCK_SQL } from './sql.js';

// GET_LOCK on a dedicated connection: held as long as the connection lives, freed by the
// server when it closes (a killed wrapper's too). All statements on it are short: the
// heartbeat asks, every few seconds, whether the name is still this connection's.

// The statements are the dialect's (sql.ts): the lock taken alone as the admission takes it
// (1 taken, 2 already this session's, 0 another's), released, and the heartbeat's question.
const { take: TRY, released: RELEASE } = LOCK_SQL;
// 1 while this connection holds the name, 0 if another does, NULL if nobody.
const PROBE = 'SELECT IS_USED_LOCK(?) = CONNECTION_ID() AS held';

// The lock as the admission statement asks for it and the outcome's releases it (see
// MysqlStore.lockAndAdmit): a name, not PostgreSQL's bigint key.
export function namedLock(name: string): LockRequest & LockRelease {
  return { kind: 'named', name };
}

// From now on the heartbeat of `session` checks that the name is still its own.
export function heldOn(session: MysqlSession, name: string): void {
  session.holdsLock(async (ask) => {
    const [row] = await ask<{ held: number | null }>(PROBE, [name]);
    if (row?.held === 1) return null;
    return row?.held === 0 ? `MySQL lock ${name} is held by another connection` : `connection ${session.connectionId} no longer holds MySQL lock ${name}`;
  });
}

// The server ends a lock session silent for LOCK_IDLE_S (lock-name.ts), which frees the name.
// The heartbeat keeps a live wrapper's session busy; a wrapper stopped or starved for
// WATCHDOG_MS (no heartbeat proved the lock since) has its command killed by the watchdog, 1
// to 2 s later, well before the server can give the name to another host; a live one notices
// a silent server itself within seconds, and stops its command first.
const WATCHDOG_MS = 20_000;
// Before a command starts, a lock not proven this recently is asked about first.
const STALE_MS = 5000;

// The lock held by `session`, as the run path sees it.
function heldLock(session: MysqlSession, name: string, say?: Messages): { held: Lock; releasedElsewhere(): void } {
  let released = false;
  const held: Lock = {
    inheritFd: null,
    commandDiesWithWrapper: true,
    onLost: (handler) => session.watch(handler),
    // The heartbeat tells, in its own time (MysqlSession.watch); after a long silence (a
    // stopped cronguard) the server is asked before a command starts. At the command's end, a
    // silence as long as the watchdog's limit while it ran means the watchdog may have ended
    // it, the lock unproven: the run is lost (75), whatever the command's own end says.
    verify: async (moment) => {
      if (moment === 'start') {
        if (session.sinceBeatMs() > STALE_MS) await session.confirmLock();
        session.resetSilence();
        return;
      }
      const silent = session.longestSilenceMs();
      if (silent >= WATCHDOG_MS) session.giveUpLock(`not proven held for ${(silent / 1000).toFixed(1)}s (cronguard was stopped or starved); its watchdog ends the command after ${WATCHDOG_MS / 1000}s`);
    },
    heartbeat: { limitMs: WATCHDOG_MS, sinceMs: () => session.sinceBeatMs(), onBeat: (beat) => session.onBeat(beat) },
    release: async () => {
      if (session.lost || released) return;
      released = true;
      // If this fails, closing the session frees the name all the same.
      const [row] = await session.query<{ released: number | null }>(RELEASE, [name]).catch(() => []);
      if (row && row.released !== 1) say?.verbose(`MySQL lock ${name} was no longer held by connection ${session.connectionId}`);
    },
  };
  const releasedElsewhere = () => {
    released = true;
  };
  return { held, releasedElsewhere };
}

// The MySQL lock as the admission statement takes it (see DatabaseLock): the log is on the
// lock's session; when the log fails, the lock is taken alone.
export function mysqlLock(session: MysqlSession, name: string, say?: Messages): DatabaseLock {
  const description = `mysql lock ${name} on ${session.config.display}`;
  const { held, releasedElsewhere } = heldLock(session, name, say);
  const tryOnce = async (): Promise<Lock | null> => {
    let row: { got: number | null; read_only: number } | undefined;
    try {
      [row] = await session.query<{ got: number | null; read_only: number }>(TRY, [name, name]);
    } catch (error) {
      throw mysqlError(error, session.config.display);
    }
    if (Number(row?.read_only) === 1) throw readOnlyServer(session.config.display);
    if (row?.got !== 1 && row?.got !== 2) return null;
    heldOn(session, name);
    return held;
  };
  const backend: LockBackend = { description, acquire: ({ waitMs, abort }) => retryUntil(tryOnce, waitMs, abort) };
  return {
    description,
    request: namedLock(name),
    alone: { tryOnce, backend },
    spareWatchdog: true,
    taken: () => {
      heldOn(session, name);
      return { lock: held, release: namedLock(name), releasedElsewhere };
    },
    close: () => session.close(),
  };
}
