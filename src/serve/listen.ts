import { statSync } from 'node:fs';
import { isIP } from 'node:net';
import { UsageError } from '../errors.js';
import { readRegularFile } from '../util/safe-path.js';

export const DEFAULT_LISTEN = '127.0.0.1:8470';

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

// `HOST:PORT` or `[IPv6]:PORT`; port 0 lets the system choose (the line printed at start
// says which). A host name other than localhost is accepted but treated as reachable from
// outside.
export function parseListen(text: string): ListenAddress {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text);
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (!match || host === undefined || port > 65535) {
    throw new UsageError(`--listen: '${text}' is not ADDRESS:PORT (e.g. 127.0.0.1:8470, [::1]:8470, 0.0.0.0:8470)`);
  }
  if (match[1] !== undefined && isIP(host) !== 6) throw new UsageError(`--listen: '${host}' is not an IPv6 address`);
  if (match[2] !== undefined && !/^[A-Za-z0-9.-]+$/.test(host)) throw new UsageError(`--listen: '${host}' is not an address or host name`);
  return { host, port };
}

// Only the machine itself can reach these; anything else needs a token or --read-only.
export function isLoopback(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

// The shared secret of --token-file: its first line. A file others may read is a token
// others know, worth a warning on every start.
export function readToken(file: string, warn: (line: string) => void): string {
  const token = (readRegularFile(file, '--token-file', 64 * 1024).split('\n')[0] ?? '').trim();
  if (token.length < 16) throw new UsageError(`--token-file: ${file} must hold a token of at least 16 characters on its first line`);
  if ((statSync(file).mode & 0o044) !== 0) warn(`${file} is readable by group or others; chmod 600 it, the token gives control of every job`);
  return token;
}
