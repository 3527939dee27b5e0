import { isIP } from 'node:net';
import type { Context, MiddlewareHandler } from 'hono';
import { UsageError } from '../errors.js';
import { isLoopback } from './listen.js';

// Who sent a request and how the browser addressed this server: the connection and the
// Host header, or, for a request that a trusted reverse proxy passed on, what the proxy
// says in X-Forwarded-For, -Proto, -Host and -User.
export interface Client {
  // The client's address; behind a trusted proxy, the one that connected to the proxy.
  readonly address: string | null;
  // Host (with its port) as the browser wrote it.
  readonly host: string;
  // Whether the browser speaks TLS to us (through the proxy); null when nobody says.
  readonly https: boolean | null;
  // The login a trusted proxy checked (X-Forwarded-User), for the record of who asked.
  readonly user: string | null;
}

// --trust-proxy: the proxies whose X-Forwarded-* headers count. A proxy not in the list
// would let any client claim to be anyone, on any scheme.
export interface TrustedProxies {
  readonly loopback: boolean;
  readonly addresses: ReadonlySet<string>;
}

// `--trust-proxy` alone trusts a proxy on this machine; `--trust-proxy ADDR,...` names them
// (`loopback` among them for this machine's).
export function parseTrustProxy(value: string | true | undefined): TrustedProxies | null {
  if (value === undefined) return null;
  if (value === true) return { loopback: true, addresses: new Set() };
  const words = value.split(',').map((w) => w.trim()).filter((w) => w !== '');
  const bad = words.find((w) => w !== 'loopback' && isIP(w) === 0);
  if (bad !== undefined || words.length === 0) throw new UsageError(`--trust-proxy: '${bad ?? value}' is not an IP address (or 'loopback')`);
  return { loopback: words.includes('loopback'), addresses: new Set(words.filter((w) => w !== 'loopback').map((w) => plain(canonical(w)))) };
}

// An IPv6 address as the socket names its peer (RFC 5952: lower case, the longest run of
// zeros shortened), however the operator wrote it: 0:0:0:0:0:0:0:1 is ::1.
function canonical(address: string): string {
  if (isIP(address) !== 6 || address.includes('%')) return address.toLowerCase();
  return new URL(`http://[${address}]/`).hostname.slice(1, -1);
}

// Sets the request's Client (read with clientOf) before anything else looks at it.
export function clientInfo(trusted: TrustedProxies | null): MiddlewareHandler {
  return async (c, next) => {
    c.set('client', describe(c, trusted));
    await next();
  };
}

export function clientOf(c: Context): Client {
  return (c.get('client') as Client | undefined) ?? describe(c, null);
}

// Whether the browser reached us over TLS: the trusted proxy says so, or the browser's own
// Origin header on a POST does (which no other site can forge), as on the login form.
export function viaHttps(c: Context): boolean {
  const https = clientOf(c).https;
  return https ?? c.req.header('origin')?.startsWith('https://') === true;
}

// Who asked for a run from the pages, as the requests table and `status` show it.
export function requester(c: Context): string {
  const { user, address } = clientOf(c);
  return `web${user ? ` ${user}` : ''}${address ? ` (${address})` : ''}`;
}

function describe(c: Context, trusted: TrustedProxies | null): Client {
  const socket = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket;
  const peer = socket?.remoteAddress ? plain(socket.remoteAddress) : null;
  const host = c.req.header('host') ?? '';
  if (trusted === null || peer === null || !trusts(trusted, peer)) return { address: peer, host, https: null, user: null };
  // The right-most address not itself a trusted proxy connected to the first proxy; what
  // stands left of it the client wrote itself.
  const chain = (c.req.header('x-forwarded-for') ?? '').split(',').map((a) => plain(a.trim()));
  let address = peer;
  for (const hop of chain.reverse()) {
    if (isIP(hop) === 0) break;
    address = hop;
    if (!trusts(trusted, hop)) break;
  }
  const proto = first(c.req.header('x-forwarded-proto'))?.toLowerCase();
  const user = c.req.header('x-forwarded-user')?.replace(/[\x00-\x1f\x7f]/g, '').trim().slice(0, 100);
  return {
    address,
    host: first(c.req.header('x-forwarded-host')) || host,
    https: proto === 'https' ? true : proto === 'http' ? false : null,
    user: user || null,
  };
}

function trusts(trusted: TrustedProxies, address: string): boolean {
  return (trusted.loopback && isLoopback(address)) || trusted.addresses.has(address);
}

// An IPv4 client of a dual-stack socket shows as ::ffff:a.b.c.d.
function plain(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

// A proxy behind another appends to the list: the first value is the browser's.
function first(value: string | undefined): string | undefined {
  return value?.split(',')[0]?.trim();
}
