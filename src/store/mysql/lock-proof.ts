import { monotonicMs } from '../../util/time.js';
import type { MysqlLockProbe } from './session.js';

type Ask = <R>(sql: string, params: readonly unknown[]) => Promise<R[]>;

// How a session tells a lost lock and a silent server (connection.ts). Between heartbeats it
// knows how to ask the server whether the lock is still its own (the probe, once the lock is
// held), when an answer last proved it, and who hears of each proof (the command's watchdog
// counts on them: see lock.ts).
export class LockProof {
  private probe: MysqlLockProbe | null = null;
  // When (monotonicMs) the last question that came back proving the lock was sent.
  private lastProof = monotonicMs();
  // The longest gap between two proofs since resetSilence.
  private longestGap = 0;
  private readonly beats = new Set<() => void>();

  get held(): boolean {
    return this.probe !== null;
  }

  // The lock is held from now on (taken just now: the first proof counts from here).
  hold(probe: MysqlLockProbe): void {
    this.probe = probe;
    this.lastProof = monotonicMs();
    this.longestGap = 0;
  }

  // Asks the server (with `ask`, or a plain round trip while no lock is held); null when the
  // lock is proven (and its listeners hear), else why it is not this session's any more.
  async ask(ask: Ask): Promise<string | null> {
    const sentAt = monotonicMs();
    const gone = this.probe ? await this.probe(ask) : await ask('SELECT 1', []).then(() => null);
    if (gone) return gone;
    this.longestGap = Math.max(this.longestGap, sentAt - this.lastProof);
    this.lastProof = sentAt;
    for (const beat of this.beats) beat();
    return null;
  }

  sinceMs(): number {
    return monotonicMs() - this.lastProof;
  }

  longestSilenceMs(): number {
    return Math.max(this.longestGap, this.sinceMs());
  }

  resetSilence(): void {
    this.longestGap = 0;
  }

  onBeat(beat: () => void): () => void {
    this.beats.add(beat);
    return () => this.beats.delete(beat);
  }
}
