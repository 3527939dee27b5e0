import { UsageError } from '../../errors.js';
import type { Setting } from '../../util/setting.js';

// Where a Redis (or Valkey) lock lives, as --lock-url names it:
//   redis://[USER[:PASSWORD]@]HOST[:PORT][/DB][?prefix=P]
//   rediss://...[?ca=FILE&prefix=P]   (TLS; the server's certificate checked against the
//                                      system's CAs, or FILE's)
// Read by the CLI without loading any network code; the client is lock/redis/resp.ts.
export interface RedisTarget {
  readonly host: string;
  readonly port: number;
  readonly db: number;
  readonly user: string | undefined;
  readonly password: string | undefined;
  readonly tls: { readonly ca: string | undefined } | null;
  // The middle part of every key: the prefix given, else the database number.
  readonly prefix: string;
  // For messages: without the password.
  readonly display: string;
  readonly from: string;
}

const DEFAULT_PORT = 6379;
const PARAMS = new Set(['ca', 'prefix']);
// A prefix goes into key names between colons: no blanks, no colon of its own.
const PREFIX = /^[A-Za-z0-9_.-]{1,64}$/;

// A URL of this form names a Redis lock (and implies -l redis).
export function isRedisUrl(url: string): boolean {
  return /^rediss?:\/\//i.test(url);
}

export function resolveRedisTarget(url: Setting): RedisTarget {
  const option = url.from.startsWith('--') ? url.from : `lock URL (${url.from})`;
  let parsed: URL;
  try {
    parsed = new URL(url.value);
  } catch {
    // Not echoed: it may hold a password.
    throw new UsageError(`${option}: not a URL of the form redis://HOST[:PORT][/DB] (rediss:// for TLS), with USER:PASSWORD@ before HOST for a password`);
  }
  const scheme = parsed.protocol.toLowerCase();
  if (scheme !== 'redis:' && scheme !== 'rediss:') throw new UsageError(`${option}: a lock URL starts with redis:// or rediss://`);
  const decode = (text: string, what: string) => {
    try {
      return decodeURIComponent(text);
    } catch {
      throw new UsageError(`${option}: the ${what} has a broken %-escape (% and two hex digits)`);
    }
  };
  const params = new Map<string, string>();
  for (const [name, value] of parsed.searchParams) {
    if (!PARAMS.has(name)) throw new UsageError(`${option}: unknown parameter '${name}' (use ${[...PARAMS].join(', ')})`);
    if (params.has(name)) throw new UsageError(`${option}: parameter '${name}' given twice`);
    params.set(name, value);
  }
  const host = decode(parsed.hostname.replace(/^\[(.*)\]$/, '$1'), 'host') || 'localhost';
  const port = parsed.port === '' ? DEFAULT_PORT : Number(parsed.port);
  if (!(port >= 1 && port <= 65535)) throw new UsageError(`${option}: the port is not a number from 1 to 65535`);
  const path = parsed.pathname.replace(/^\//, '');
  if (path !== '' && !/^\d{1,5}$/.test(path)) throw new UsageError(`${option}: the path is a database number (/0, /1...), '${decode(path, 'path')}' is not one`);
  const db = path === '' ? 0 : Number(path);
  const prefix = params.get('prefix') ?? String(db);
  if (!PREFIX.test(prefix)) throw new UsageError(`${option}: prefix '${prefix}' is not letters, digits, _ . - (at most 64)`);
  const ca = params.get('ca');
  if (ca !== undefined && scheme !== 'rediss:') throw new UsageError(`${option}: ca= checks a TLS server; use rediss://`);
  const user = parsed.username === '' ? undefined : decode(parsed.username, 'user');
  const password = parsed.password === '' ? undefined : decode(parsed.password, 'password');
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return Object.freeze({
    host,
    port,
    db,
    user,
    password,
    tls: scheme === 'rediss:' ? Object.freeze({ ca }) : null,
    prefix,
    display: `${scheme}//${user ? `${encodeURIComponent(user)}@` : ''}${shownHost}:${port}/${db}`,
    from: url.from,
  });
}

// The keys of a job's lock, documented (docs/locks.md) so that an application can hold a job
// off with SET cronguard:P:JOB x NX PX ...: the lock, its fencing counter, and a minute's tick.
export function redisKeys(target: RedisTarget, job: string) {
  return keysOf(`cronguard:${target.prefix}:${job}`);
}

// The keys that go with a lock's key: its fencing counter and its ticks.
export function keysOf(lock: string) {
  return {
    lock,
    fence: `${lock}:fence`,
    tick: (minute: Date) => `${lock}:tick:${minute.toISOString().slice(0, 16)}`,
  };
}
