import type { Messages } from '../util/io.js';
import { monotonicMs } from '../util/time.js';
import type { Lock } from './backend.js';

// A lease (-l lease): a row in the run log's database with a holder, an epoch and an expiry
// on the server's clock, taken by the admission statement (see migration 0014) and renewed
// by this holder over any connection. The server's clock decides when the lease expires;
// the holder, whose clock need not agree, counts from the moment it SENT its last renewal
// that succeeded (the server set the expiry at or after that moment), on its own monotonic
// clock, and has its command gone well before that expiry can come:
//   renew every third of the ttl; none succeeded for lossMs: lost, the command gets its
//   kill signal, and SIGKILL graceMs later. The watchdog (cronguard stopped or killed) acts
//   within watchdogLimitMs + 2 s of the sending of the last renewal that succeeded, at most
//   0.9 of the ttl, and
//   no sooner than cronguard's own SIGKILL, so that a live cronguard always stops its
//   command itself, with its signal first.
const RENEW = 1 / 3;
// After a renewal that failed, the next try comes this much of the ttl later (sooner when
// less is left before the loss).
const RETRY = 1 / 15;
// A renewal still unanswered after half the time left before the loss (but not under this)
// gets another beside it, over a connection of its own; the first keeps waiting, and its
// answer counts whenever it comes. On a machine so busy that the pooler or the server answer
// late, giving up on it would only add connections to the crowd; on a path that went dead,
// the other connection may get through.
const MIN_TRY_MS = 1000;
// How long a late holder waits for its database to say the lease is still its own.
const ASK_MS = 5000;

// How long the command's watchdog lets a lease go without a renewal: it kills the command
// between limit + 1 and limit + 2 s after the last successful renewal was sent (see Watchdog).
export function watchdogLimitMs(ttlMs: number): number {
  return Math.max(1000, Math.floor((ttlMs * 0.9 - 2000) / 1000) * 1000);
}

// Between the kill signal and SIGKILL when the lease is lost.
export function graceMs(ttlMs: number): number {
  return Math.min(2000, ttlMs / 10);
}

// How long without a renewal counts as lost: at most 0.6 of the ttl, and early enough that
// cronguard's SIGKILL comes before the watchdog's earliest.
export function lossMs(ttlMs: number): number {
  return Math.min(ttlMs * 0.6, watchdogLimitMs(ttlMs) + 1000 - graceMs(ttlMs));
}

// What the admission took: the lock key, this holder's epoch (the fencing token), the ttl,
// and when (monotonicMs) the statement that took it was sent. The key is a lease row's
// number in a database, a key's name in Redis (lock/redis/).
export interface LeaseTerms<K extends LeaseKey = bigint> {
  readonly key: K;
  readonly epoch: bigint;
  readonly ttlMs: number;
  readonly sentAt: number;
}

export type LeaseKey = bigint | string;

// How a lease reaches its database: any connection will do, pooled or not.
export interface LeaseLine<K extends LeaseKey = bigint> {
  // True: renewed; false: the lease is no longer this holder's. Rejects when the database
  // could not be asked; connecting gives up after connectMs. With a renewal of this holder
  // still unanswered, it goes over another connection.
  renew(key: K, epoch: bigint, ttlMs: number, connectMs: number): Promise<boolean>;
  release(key: K, epoch: bigint): Promise<void>;
  close(): Promise<void>;
}

export interface HeldLease extends Lock {
  // The outcome statement released it (PostgresStore.finishRun): nothing left to do.
  releasedElsewhere(): void;
}

// The lease as held: renewed in the background from now on, lost when renewals stop.
export function holdLease<K extends LeaseKey>(terms: LeaseTerms<K>, line: LeaseLine<K>, env: Readonly<Record<string, string>>, say: Messages): HeldLease {
  const { key, epoch, ttlMs } = terms;
  let lastSent = terms.sentAt;
  let lost: string | null = null;
  let done = false;
  let lostHandler: ((reason: string) => void) | null = null;
  const beats = new Set<() => void>();
  let renewTimer: NodeJS.Timeout | null = null;
  let lossTimer: NodeJS.Timeout | null = null;
  // A command runs under the lease (between verify's start and end).
  let running = false;

  const stop = () => {
    done = true;
    if (renewTimer) clearTimeout(renewTimer);
    if (lossTimer) clearTimeout(lossTimer);
    beats.clear();
  };
  const lose = (reason: string) => {
    if (lost || done) return;
    lost = `lease of ${key} (epoch ${epoch}): ${reason}`;
    stop();
    lostHandler?.(lost);
  };
  const unrenewed = () => `not renewed for ${((monotonicMs() - lastSent) / 1000).toFixed(1)}s of its ${ttlMs / 1000}s`;
  const armLoss = () => {
    if (lossTimer) clearTimeout(lossTimer);
    lossTimer = setTimeout(late, Math.max(0, lastSent + lossMs(ttlMs) - monotonicMs()));
  };
  const schedule = (delayMs: number) => {
    if (done) return;
    if (renewTimer) clearTimeout(renewTimer);
    renewTimer = setTimeout(renew, Math.max(0, delayMs));
  };
  // When the latest renewal was sent: the failure of an older one changes nothing then.
  let latest = 0;
  function renew(): void {
    const sent = monotonicMs();
    const left = lastSent + lossMs(ttlMs) - sent;
    if (left <= 0) {
      late();
      return;
    }
    latest = sent;
    line.renew(key, epoch, ttlMs, left).then((ours) => answered(sent, ours), (error: Error) => failed(sent, error));
    schedule(Math.max(left / 2, MIN_TRY_MS));
  }
  function answered(sent: number, ours: boolean): void {
    if (done) return;
    if (!ours) {
      lose('taken over or broken (no longer this holder\'s)');
      return;
    }
    if (sent <= lastSent) return;
    lastSent = sent;
    armLoss();
    // Every renewal that holds the lease feeds the watchdog, however late its reply: the beat
    // carries how long ago the renewal was sent (heartbeat.sinceMs), and the watchdog counts
    // from then, as the lease's expiry does. A late reply that fed it nothing left a valid
    // lease's command to the watchdog's SIGKILL.
    for (const beat of beats) beat();
    schedule(sent + ttlMs * RENEW - monotonicMs());
  }
  function failed(sent: number, error: Error): void {
    if (done) return;
    say.verbose(`lease of ${key}: renewal failed (${error.message}); retrying`);
    if (sent === latest) schedule(Math.min(ttlMs * RETRY, (lastSent + lossMs(ttlMs) - monotonicMs()) / 4));
  }
  const overdue = () => !lost && !done && monotonicMs() - lastSent >= lossMs(ttlMs);
  // Past the loss time with nothing running under the lease (an admission answered late
  // by a starved machine or pooler, a retry's delay or a loop's wait in which cronguard was
  // starved or stopped): the database says whether it is still this holder's. The epoch
  // unchanged means nobody took it meanwhile (taking draws a new one), so nobody else can
  // have run: a renewal then holds it on.
  let asking: Promise<void> | null = null;
  const ask = (): Promise<void> => {
    asking ??= (async () => {
      // The answer decides, not a timer that fires meanwhile.
      if (renewTimer) clearTimeout(renewTimer);
      if (lossTimer) clearTimeout(lossTimer);
      const sent = monotonicMs();
      let timer: NodeJS.Timeout | undefined;
      const silence = new Promise<null>((resolve) => (timer = setTimeout(resolve, ASK_MS, null)));
      const ours = await Promise.race([line.renew(key, epoch, ttlMs, ASK_MS).catch(() => null), silence]).finally(() => clearTimeout(timer));
      if (ours === null) lose(`${unrenewed()}, and its database did not answer within ${ASK_MS / 1000}s`);
      else answered(sent, ours);
    })().finally(() => (asking = null));
    return asking;
  };
  // No renewal succeeded for the loss time: lost if a command runs, else asked (see ask).
  function late(): void {
    if (running) lose(unrenewed());
    else void ask();
  }
  // Taken already overdue: no timer may count it lost before the database is asked.
  if (overdue()) void ask();
  else {
    armLoss();
    schedule(ttlMs * RENEW - (monotonicMs() - lastSent));
  }

  return {
    inheritFd: null,
    commandDiesWithWrapper: true,
    env: { ...env, CRONGUARD_FENCING_TOKEN: String(epoch) },
    lossGraceMs: graceMs(ttlMs),
    onLost(handler) {
      lostHandler = handler;
      if (lost) handler(lost);
    },
    // A stopped cronguard's timers fire late: the time since the last renewal tells, or,
    // before a command starts, the database (see ask).
    async verify(moment) {
      if (moment === 'end') {
        running = false;
        if (overdue()) lose(unrenewed());
        return;
      }
      if (asking) await asking;
      else if (overdue()) await ask();
      // An answer that came late may leave the lease past its loss time all the same: then
      // no command may start under it.
      if (overdue()) lose(unrenewed());
      running = !lost && !done;
    },
    heartbeat: {
      limitMs: watchdogLimitMs(ttlMs),
      // From the sending of the statement that last renewed (or took) the lease, the
      // moment its expiry counts from.
      sinceMs: () => monotonicMs() - lastSent,
      onBeat(beat) {
        beats.add(beat);
        return () => beats.delete(beat);
      },
    },
    releasedElsewhere() {
      stop();
    },
    async release() {
      const held = !done && !lost;
      stop();
      // A lease not released here (the database out of reach) expires after its ttl.
      if (held) await line.release(key, epoch).catch(() => {});
      await line.close();
    },
  };
}
