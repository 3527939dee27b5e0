// Wrong tokens, per client: the first few are free (a typo), then each further try must
// wait, twice as long after every failure, up to a ceiling. A try while waiting is refused
// without looking at the token, so guessing runs at one token per wait whatever the rate
// of requests; the right token resets the count.
const FREE_TRIES = 5;
const FIRST_WAIT_MS = 4000;
const LONGEST_WAIT_MS = 5 * 60 * 1000;
// Clients forgotten after this long without a failure, and at most this many kept (a
// flood of addresses must not grow the server without bound).
const FORGET_AFTER_MS = 60 * 60 * 1000;
const MAX_CLIENTS = 10_000;

interface Failures {
  count: number;
  until: number;
  last: number;
}

export class Throttle {
  private readonly clients = new Map<string, Failures>();

  constructor(private readonly now: () => number = Date.now) {}

  // Milliseconds this client must wait before its token is looked at; 0: now.
  wait(client: string): number {
    const failures = this.clients.get(client);
    return failures ? Math.max(0, failures.until - this.now()) : 0;
  }

  failed(client: string): void {
    const now = this.now();
    const failures = this.clients.get(client) ?? { count: 0, until: 0, last: now };
    failures.count += 1;
    failures.last = now;
    if (failures.count > FREE_TRIES) failures.until = now + Math.min(LONGEST_WAIT_MS, FIRST_WAIT_MS * 2 ** (failures.count - FREE_TRIES - 1));
    // Re-inserted, so that the map's order is the order of last failure (oldest first).
    this.clients.delete(client);
    this.clients.set(client, failures);
    for (const [key, old] of this.clients) {
      if (this.clients.size <= MAX_CLIENTS && old.last > now - FORGET_AFTER_MS) break;
      this.clients.delete(key);
    }
  }

  succeeded(client: string): void {
    this.clients.delete(client);
  }
}
