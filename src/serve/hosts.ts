import { isIP } from 'node:net';
import { hostname } from 'node:os';
import type { MiddlewareHandler } from 'hono';
import { UsageError } from '../errors.js';
import { isLoopback } from './listen.js';
import { clientOf } from './proxy.js';

// --allowed-hosts: `cron.example,cron` — names this server answers to besides its own.
export function parseAllowedHosts(value: string | undefined): string[] {
  if (value === undefined) return [];
  const names = value.split(',').map((n) => n.trim().toLowerCase().replace(/\.$/, '')).filter((n) => n !== '');
  const bad = names.find((n) => !/^[a-z0-9.-]+$/.test(n));
  if (bad !== undefined || names.length === 0) throw new UsageError(`--allowed-hosts: '${bad ?? value}' is not a host name`);
  return names;
}

// Where no token guards the pages (loopback, --read-only), only a Host naming this server
// is answered: a site whose name an attacker points at this machine (DNS rebinding) would
// otherwise be same-origin with this server in the victim's browser, and read it. An
// address in Host is safe (no other site can have it as its name), as are this machine's
// own names and those --allowed-hosts gives. Behind a trusted proxy the browser's name
// (X-Forwarded-Host) is checked as well as the connection's Host, never instead of it: a
// rebinding page may add any header to its same-origin fetch, and a browser on this
// machine connects from a trusted (loopback) address.
export function hostCheck(allowed: readonly string[]): MiddlewareHandler {
  const own = hostname().toLowerCase();
  const names = new Set([...allowed, own, own.split('.')[0] as string]);
  const answered = (host: string) => {
    const name = (host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '')).toLowerCase().replace(/\.$/, '');
    return isLoopback(name) || isIP(name) !== 0 || names.has(name);
  };
  return async (c, next) => {
    const refused = [c.req.header('host') ?? '', clientOf(c).host].find((host) => !answered(host));
    if (refused === undefined) return next();
    return c.text(`this server answers only to its own names and --allowed-hosts, not to '${refused}'`, 421);
  };
}
