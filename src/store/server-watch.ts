import { monotonicMs } from '../util/time.js';

// How a session with a database server (PostgreSQL's, MySQL's) tells that the server, or the
// network to it, stopped answering: a heartbeat while it holds a lock or listens, and a
// deadline on a statement that waits. Each dialect's session says what a beat asks.

// How often a watched session proves it is alive, and how long an answer may take: a
// session killed, a server restarted or a network cut is noticed within both at worst.
const HEARTBEAT_MS = 2000;
const HEARTBEAT_TIMEOUT_MS = 4000;

export interface Beat {
  // The server's last word (monotonicMs): answers to other statements count.
  lastHeard(): number;
  // One beat's question: null when the session (and its lock, if it holds one) is proven,
  // else why its lock is no longer this session's.
  ask(): Promise<string | null>;
  // The session is lost, and why; its lock is gone though the session lives.
  lost(reason: string): void;
  lockGone(reason: string): void;
  // Why a beat whose question failed ends the session.
  failed(error: Error): string;
}

// Starts the heartbeat (every HEARTBEAT_MS / 2, so that a beat is never late by more than
// half of one); `counted` hears each question sent. Returns its timer, which holds no
// process open.
export function startHeartbeat(beat: Beat, counted: () => void): NodeJS.Timeout {
  let pendingSince: number | null = null;
  const timer = setInterval(() => {
    if (pendingSince !== null) {
      // Decided after the input already received has been read (setImmediate runs after the
      // poll phase), and counted from what the server last sent: on a starved machine the
      // answer may be waiting in the socket, and a heartbeat queued behind other statements
      // waits its turn.
      const since = pendingSince;
      setImmediate(() => {
        if (pendingSince === since && monotonicMs() - Math.max(since, beat.lastHeard()) > HEARTBEAT_TIMEOUT_MS) {
          beat.lost('the server stopped answering');
        }
      });
      return;
    }
    pendingSince = monotonicMs();
    counted();
    beat.ask().then(
      (gone) => {
        pendingSince = null;
        if (gone) beat.lockGone(gone);
      },
      (error: Error) => beat.lost(beat.failed(error)),
    );
  }, HEARTBEAT_MS / 2);
  timer.unref();
  return timer;
}

// Calls `onSilent` once the server has said nothing for `ms` (its last word at `lastHeard`)
// while a statement waits; checked after input already received is read (setImmediate), so
// a busy event loop is not taken for a silent server. Returns what stops the watch.
export function silenceDeadline(ms: number, lastHeard: () => number, onSilent: (reason: string) => void): () => void {
  const since = monotonicMs();
  let done = false;
  let timer: NodeJS.Timeout;
  const check = () =>
    setImmediate(() => {
      if (done) return;
      const quiet = monotonicMs() - Math.max(since, lastHeard());
      if (quiet >= ms) onSilent(`the server did not answer within ${ms / 1000} s`);
      else timer = setTimeout(check, ms - quiet);
    });
  timer = setTimeout(check, ms);
  return () => {
    done = true;
    clearTimeout(timer);
  };
}

// The least a statement is given under answerAt: longer than the servers' lock timeouts on
// the log's writes (5 s), so that a live server's answer to a statement sent as a wait ends
// is never cut short.
const ANSWER_FLOOR_MS = 6000;

// Calls `onLate` once `answerAt` (monotonicMs), or ANSWER_FLOOR_MS from now if later, has
// passed while a statement waits; checked after input already received is read, as above.
function answerDeadline(answerAt: number, onLate: (reason: string) => void): () => void {
  let done = false;
  const timer = setTimeout(
    () =>
      setImmediate(() => {
        if (!done) onLate('no answer before the wait was over');
      }),
    Math.max(answerAt - monotonicMs(), ANSWER_FLOOR_MS),
  );
  return () => {
    done = true;
    clearTimeout(timer);
  };
}

// A statement's answer, raced against the session's loss: the session rejects each entry of
// `inFlight` once it knows itself lost, where a cut network would hold the statement until
// its timeout. With `answerMs`, a server silent that long while it waits loses the session
// (`onSilent`); with `answerAt`, so does one still unanswered then (see answerDeadline). One
// entry per statement, gone when it settles, so nothing keeps a settled result reachable.
export async function answerOf<T>(
  sent: Promise<T>,
  inFlight: Set<(error: Error) => void>,
  answerMs: number | null,
  lastHeard: () => number,
  onSilent: (reason: string) => void,
  answerAt: number | null,
): Promise<T> {
  let rejectLost: (error: Error) => void = () => {};
  const lost = new Promise<never>((_, reject) => {
    rejectLost = reject;
  });
  inFlight.add(rejectLost);
  const stopDeadline = answerMs === null ? () => {} : silenceDeadline(answerMs, lastHeard, onSilent);
  const stopLate = answerAt === null ? () => {} : answerDeadline(answerAt, onSilent);
  try {
    return await Promise.race([sent, lost]);
  } finally {
    inFlight.delete(rejectLost);
    stopDeadline();
    stopLate();
  }
}
