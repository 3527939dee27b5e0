import { lstatSync, readdirSync } from 'node:fs';
import { fileError } from '../errors.js';

// The lockfile lock's epochs (see lockfile.ts), as its holder and `cronguard locks` read
// them. A lease not refreshed for STALE_MS was abandoned and may be taken over.
export const STALE_MS = 10_000;

// Epoch numbers in canonical decimal only, compared as BigInt: a Number would round
// epoch-9007199254740993 down to its predecessor, and print 10^21 as "1e+21", a name the
// next reader does not count. At most 240 digits, so that the next one's name still fits a
// file name (255 bytes): a longer one planted would stop every run. Any other name in the
// container is not an epoch.
const EPOCH = /^epoch-([1-9]\d{0,239})$/;

// The highest epoch in the container; 0 when there is none yet.
export function highestEpoch(container: string): bigint {
  let names: string[];
  try {
    names = readdirSync(container);
  } catch (error) {
    throw fileError('lock directory', container, error);
  }
  let max = 0n;
  for (const name of names) {
    const digits = EPOCH.exec(name)?.[1];
    if (digits !== undefined && BigInt(digits) > max) max = BigInt(digits);
  }
  return max;
}

export function epochPath(container: string, epoch: bigint): string {
  return `${container}/${epochName(epoch)}`;
}

export function epochName(epoch: bigint): string {
  return `epoch-${epoch}`;
}

// A lease is an epoch that is a regular file refreshed within STALE_MS: a link, FIFO or
// device planted in its place holds nothing, and is never followed or opened.
export function isFresh(path: string): boolean {
  try {
    const stat = lstatSync(path);
    return stat.isFile() && Date.now() - stat.mtimeMs < STALE_MS;
  } catch {
    return false;
  }
}
