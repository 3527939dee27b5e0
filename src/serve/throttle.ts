import { isIP } from 'node:net';

// Wrong tokens, per client (an IPv4 address, or an IPv6 /64: see networkOf): the first few are free (a typo), then each further try must
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
  wait(address: string): number {
    const failures = this.clients.get(networkOf(address));
    return failures ? Math.max(0, failures.until - this.now()) : 0;
  }

  failed(address: string): void {
    const client = networkOf(address);
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

  succeeded(address: string): void {
    this.clients.delete(networkOf(address));
  }
}

// The client an address stands for: an IPv6 host is given a /64 of its own (one home line,
// one rented server), so each of its addresses counting apart would give it endless free
// tries; its first four groups, in full, are the client. One that embeds an IPv4 address
// (NAT64's 64:ff9b::a.b.c.d) stands for that IPv4 client alone.
export function networkOf(address: string): string {
  if (isIP(address) !== 6 || address.includes('.')) return address;
  const [head = '', tail] = address.toLowerCase().split('%')[0]?.split('::') ?? [];
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const left = groups(head);
  const right = groups(tail);
  const missing = tail === undefined ? 0 : 8 - left.length - right.length;
  const all = [...left, ...Array<string>(Math.max(0, missing)).fill('0'), ...right];
  return `${all.slice(0, 4).map((g) => g.padStart(4, '0')).join(':')}::/64`;
}
