import { readFileSync } from 'node:fs';
import type { ClaimedRequest, Unserved } from '../../store/requests.js';

// What one exec(2) can carry on Linux: each argument (or environment string) at most
// MAX_ARG_STRLEN bytes with its NUL, and all of them, with a pointer each, at most a quarter
// of the stack limit (at least 128 KiB, at most 6 MiB: ARG_MAX). Past either, exec fails
// with E2BIG and the run would never start.
export const MAX_ARG_BYTES = 131072;
const MIN_TOTAL = 128 * 1024;
const MAX_TOTAL = 6 * 1024 * 1024;
// The rest exec takes from the same space (the program's path, the auxiliary vector) and
// what cronguard adds to the command's environment.
const SLACK = 16 * 1024;

// Bytes that `strings` take on the new program's stack.
export function execBytes(strings: Iterable<string>): number {
  let n = 0;
  for (const s of strings) n += Buffer.byteLength(s) + 1 + 8;
  return n;
}

// What the command line may still take, after the command itself and the environment.
export function argumentRoom(argv: readonly string[], env: NodeJS.ProcessEnv): number {
  const vars = Object.entries(env).map(([k, v]) => `${k}=${v}`);
  return totalLimit() - execBytes(argv) - execBytes(vars) - SLACK;
}

// Whether one argument can be passed at all.
export function argumentFits(arg: string): boolean {
  return Buffer.byteLength(arg) < MAX_ARG_BYTES;
}

function totalLimit(): number {
  let stack = 8 * 1024 * 1024;
  try {
    const soft = /^Max stack size\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
    stack = soft === undefined ? stack : soft === 'unlimited' ? Number.POSITIVE_INFINITY : Number(soft);
  } catch {
    // Not Linux, or no /proc: the usual 8 MiB stack.
  }
  return Math.min(MAX_TOTAL, Math.max(MIN_TOTAL, stack / 4));
}

// The claimed requests whose arguments go on this run's command line, in order, as many as
// `room` bytes take; the rest wait for the next run, and a request whose own arguments could
// never fit ends failed, never run half. `batch`: all of them on one line; otherwise the
// first that has arguments (as before: the others are served by the same run). Identical
// requests in one batch are served once: the run serves all of them, their arguments once.
export function fitRequests(requests: readonly ClaimedRequest[], room: number, batch: boolean): { fit: ClaimedRequest[]; unserved: Unserved } {
  const fit: ClaimedRequest[] = [];
  const later: number[] = [];
  const refused: number[] = [];
  const onLine = new Set<string>();
  let used = 0;
  let full = false;
  for (const r of requests) {
    const size = execBytes(r.args);
    const same = JSON.stringify(r.args);
    if (!r.args.every(argumentFits) || size > room) refused.push(r.id);
    else if (r.args.length === 0) fit.push(r);
    else if (batch && onLine.has(same)) fit.push({ ...r, args: [] });
    else if (full || used + size > room || (!batch && used > 0)) {
      full = true;
      if (batch) later.push(r.id);
      else fit.push({ ...r, args: [] });
    } else {
      used += size;
      onLine.add(same);
      fit.push(r);
    }
  }
  const reason = `its arguments cannot fit one command line (each at most ${MAX_ARG_BYTES - 1} bytes, all at most ${room} here)`;
  return { fit, unserved: { later, refused, reason } };
}
