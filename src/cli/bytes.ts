import { isUtf8 } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { CronguardError, EXIT } from '../errors.js';

// Node.js hands a program its arguments and environment as text decoded from UTF-8, and
// passes text on encoded as UTF-8 (child_process takes no bytes): bytes that are not UTF-8,
// a Latin-1 file name say, would reach the command as U+FFFD. cronguard passes what it was
// given on unchanged or not at all, so it refuses such bytes, in one line, before anything
// runs. On Linux, where /proc tells the bytes; elsewhere it cannot tell.

const REFUSED = 'is not valid UTF-8, and cronguard passes what it is given on unchanged or not at all; nothing ran';

// cronguard's own arguments (everything after the script), as the kernel has them.
export function refuseNonUtf8Arguments(args: readonly string[]): void {
  // A decoding that went wrong leaves U+FFFD: most invocations read nothing more.
  if (!args.some((a) => a.includes('\uFFFD'))) return;
  const raw = procStrings('cmdline');
  if (raw === null) return;
  const own = raw.slice(raw.length - args.length);
  const bad = own.findIndex((bytes) => !isUtf8(bytes));
  if (bad < 0) return;
  throw new CronguardError(`argument ${bad + 1} ('${shown(own[bad] as Buffer)}') ${REFUSED} (with -c, printf can make the bytes; see man cronguard)`, EXIT.usage);
}

// The environment the command inherits. One read of a few kilobytes per run, as text: where
// the bytes are not UTF-8, decoding leaves U+FFFD, and only then are they split and checked
// one by one (which loads code of Node's Buffer that a run otherwise never uses).
export function refuseNonUtf8Environment(): void {
  if (!procText('environ')?.includes('\uFFFD')) return;
  const raw = procStrings('environ');
  const bad = raw?.find((entry) => !isUtf8(entry));
  if (bad === undefined) return;
  const eq = bad.indexOf('=');
  const name = shown(eq < 0 ? bad : bad.subarray(0, eq));
  throw new CronguardError(`the environment variable ${name} ${REFUSED} (unset it for cronguard: env -u ${name} cronguard ...)`, EXIT.usage);
}

// /proc/self/<file> decoded as UTF-8; null without /proc.
function procText(file: 'environ'): string | null {
  try {
    return readFileSync(`/proc/self/${file}`, 'utf8');
  } catch {
    return null;
  }
}

// /proc/self/<file> as the NUL-terminated strings it holds; null without /proc.
function procStrings(file: 'cmdline' | 'environ'): Buffer[] | null {
  let all: Buffer;
  try {
    all = readFileSync(`/proc/self/${file}`);
  } catch {
    return null;
  }
  const strings: Buffer[] = [];
  for (let start = 0; start < all.length; ) {
    const end = all.indexOf(0, start);
    strings.push(all.subarray(start, end < 0 ? all.length : end));
    start = end < 0 ? all.length : end + 1;
  }
  return strings;
}

// Bytes as a terminal can show them: printable ASCII as is, every other byte as \xNN.
function shown(bytes: Buffer): string {
  return [...bytes].map((b) => (b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`)).join('');
}
