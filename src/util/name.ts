import { UsageError } from '../errors.js';
import { sha256 } from './sha256.js';

export const MAX_NAME_LENGTH = 100;

// Names become lock file names and database keys, so they are kept to a portable set that
// cannot express a path: no slash, no leading dot (so no `..`), no control characters.
const VALID_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$/;

export function validateName(name: string): string {
  if (name === '') throw new UsageError('job name is empty; give one with -n NAME');
  if (name.length > MAX_NAME_LENGTH) {
    throw new UsageError(
      `job name is ${name.length} characters long; the limit is ${MAX_NAME_LENGTH}`,
    );
  }
  // `logs 42` and `check 42` must mean run 42, never a job named 42.
  if (/^\d+$/.test(name)) {
    throw new UsageError(`job name '${name}' is all digits, which reads as a run id; add a letter (e.g. job-${name})`);
  }
  if (!VALID_NAME.test(name)) {
    throw new UsageError(
      `invalid job name '${printable(name)}': use letters, digits and _ . : @ + - (not starting with . or -)`,
    );
  }
  return name;
}

// The contract's default name: `<basename>-<first 8 hex of sha256(argv joined by NUL)>`.
// The basename is squeezed into the valid set so any command yields a usable name.
export function deriveName(argv: readonly string[]): string {
  const hash = sha256(argv.join('\0')).toString('hex').slice(0, 8);
  const program = argv[0] ?? '';
  const base = program
    .slice(program.lastIndexOf('/') + 1)
    .replace(/[^A-Za-z0-9_.:@+-]/g, '_')
    .replace(/^[.\-:@+]+/, '')
    .slice(0, MAX_NAME_LENGTH - 9);
  return `${base || 'job'}-${hash}`;
}

function printable(text: string): string {
  const shown = text.length > 40 ? `${text.slice(0, 40)}...` : text;
  return shown.replace(/[\x00-\x1f\x7f]/g, '?');
}
