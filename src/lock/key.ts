import { UsageError } from '../errors.js';
import { sha256 } from '../util/hash.js';

// The advisory lock key of a job: the first 8 bytes of sha256("cronguard:" || name) read as
// a big-endian signed 64-bit integer. In SQL, for a DBA:
//   SELECT ('x' || left(encode(sha256(convert_to('cronguard:' || 'NAME', 'UTF8')), 'hex'), 16))::bit(64)::bigint;
export function advisoryKey(name: string): bigint {
  return sha256(`cronguard:${name}`).readBigInt64BE(0);
}

const MIN = -(2n ** 63n);
const MAX = 2n ** 63n - 1n;

// --lock-key N: a signed 64-bit integer, for locks an application already takes.
export function parseLockKey(text: string): bigint {
  if (/^-?\d{1,20}$/.test(text)) {
    const key = BigInt(text);
    if (key >= MIN && key <= MAX) return key;
  }
  throw new UsageError(`--lock-key: '${text}' is not a signed 64-bit integer`);
}
