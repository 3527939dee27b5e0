import { createRequire } from 'node:module';

// A --redact pattern runs on every line of the command's output, in cronguard's event loop:
// while it runs, nothing else does (no --timeout, no signal, no lock renewal). JavaScript's
// engine backtracks, so a pattern can cost time exponential in a line's length ('(a+)+c' on
// forty a's: past a minute) or quadratic ('.*=' on a 64 KiB piece without '=': 8 s; 1 MiB of
// it: two minutes). Measured on Node 20. So a pattern runs on V8's linear-time engine (the
// 'l' flag), whose time grows with the text times the pattern, whatever both hold.
//
// That engine runs no lookaround, back-reference or repeat count over 16. A pattern with one
// of those stays on the backtracking engine, where only its shape can bound it: one with a
// back-reference, or a group that holds a quantifier or a '|' and is itself repeated (the
// shapes that backtrack exponentially), is refused. The rest ('(?<=token=)\S+',
// 'ghp_[A-Za-z0-9]{36}') cost at worst the square of a 64 KiB piece of a line.

// Whether this Node.js has the linear engine, its flag set on first use. Not at boot: any
// V8 flag changes the hash a code cache is checked against, so Node's own built-in cache
// and ours were rejected on every run (measured: +7 to 15 ms a plain run). Set here, it costs
// a --redact run the cache of the files it loads later, and nothing to any other run; and
// node:v8 (three of Node's modules to compile) loads only then.
let linear: boolean | null = null;

function linearEngine(): boolean {
  if (linear === null) {
    if (!probe()) (createRequire(import.meta.url)('node:v8') as typeof import('node:v8')).setFlagsFromString('--enable-experimental-regexp-engine');
    linear = probe();
  }
  return linear;
}

function probe(): boolean {
  try {
    // biome-ignore lint/complexity/useRegexLiterals: /a/l would not parse before the flag is set
    new RegExp('a', 'l');
    return true;
  } catch {
    return false;
  }
}

// `source` compiled for masking (global), on the linear engine when it can be; null when it
// could backtrack exponentially there, for the caller's one line. The caller has checked that
// it compiles.
export function boundedPattern(source: string): RegExp | null {
  if (linearEngine()) {
    try {
      return new RegExp(source, 'gl');
    } catch {
      // "Cannot be executed in linear time": the backtracking engine, if its shape allows.
    }
  }
  return exponentialShape(source) ? null : new RegExp(source, 'g');
}

// A back-reference, or a group holding a quantifier or an alternative that is repeated
// ('*', '+' or '{...}' after its ')'). Escapes and character classes are stepped over.
function exponentialShape(source: string): boolean {
  // One entry per open group: whether it holds a quantifier or a '|' (at any depth).
  const open: boolean[] = [];
  let risky = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (c === '\\') {
      const next = source[i + 1] ?? '';
      if (/[1-9]/.test(next) || (next === 'k' && source[i + 2] === '<')) return true;
      i++;
    } else if (c === '[') {
      for (i++; i < source.length && source[i] !== ']'; i++) if (source[i] === '\\') i++;
    } else if (c === '(') {
      open.push(false);
    } else if (c === ')') {
      const inner = open.pop() ?? false;
      const repeated = /[*+{]/.test(source[i + 1] ?? '');
      if (inner && repeated) risky = true;
      if (open.length > 0 && (inner || repeated)) open[open.length - 1] = true;
    } else if (c === '|' || c === '*' || c === '+' || c === '?' || c === '{') {
      // '?' right after '(' opens a group's kind ('(?:', '(?<='), not a quantifier.
      if (c === '?' && source[i - 1] === '(') continue;
      if (open.length > 0) open[open.length - 1] = true;
    }
  }
  return risky;
}
