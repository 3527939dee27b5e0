import { isUtf8 } from 'node:buffer';
import { maskedValues, maskSecrets } from '../../util/redact.js';

// Masks a stream of output (--redact, --env-file) before anything sees it: the pass-through,
// the run log's tail, the live copy for `logs -f`, -q's replay, the ping's body. Loaded only
// when masking is configured.

// A line is masked whole, so a secret that a pipe's read splits in two is still found. A
// line longer than this is masked in pieces of at most this size: memory stays bounded
// whatever the command prints without a newline. A piece ends where no secret is cut (see
// cutPoint): a cut through one passed both halves on unmasked, the whole secret in a row.
export const MAX_LINE_BYTES = 64 * 1024;
// How far back from a piece's end a blank is looked for to cut at.
const BLANK_WINDOW = 1024;

// One stream's masker: push() returns what can be passed on now (whole lines, masked),
// end() the rest.
export class LineMasker {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(private readonly maxLine = MAX_LINE_BYTES) {}

  push(chunk: Buffer): Buffer | null {
    const newline = chunk.lastIndexOf(0x0a);
    if (newline < 0) {
      this.hold(chunk);
      return this.pendingBytes >= this.maxLine ? this.passLong() : null;
    }
    const whole = this.pendingBytes === 0 ? chunk.subarray(0, newline + 1) : Buffer.concat([...this.pending, chunk.subarray(0, newline + 1)]);
    this.pending = [];
    this.pendingBytes = 0;
    this.hold(chunk.subarray(newline + 1));
    // A chunk of many long lines is masked line by line up to the bound, never as one text.
    return whole.length <= this.maxLine ? mask(whole) : Buffer.concat(pieces(whole, this.maxLine).map(mask));
  }

  // What is held (a last line without its newline), masked; null when nothing is.
  end(): Buffer | null {
    if (this.pendingBytes === 0) return null;
    const rest = Buffer.concat(this.pending);
    this.pending = [];
    this.pendingBytes = 0;
    return mask(rest);
  }

  // A line grown past the bound without its newline: its pieces up to the last cut are
  // passed on, masked; the rest is held for what comes next.
  private passLong(): Buffer | null {
    const text = Buffer.concat(this.pending);
    const out = pieces(text, this.maxLine);
    const rest = out[out.length - 1] as Buffer;
    this.pending = [];
    this.pendingBytes = 0;
    this.hold(rest);
    return out.length > 1 ? Buffer.concat(out.slice(0, -1).map(mask)) : null;
  }

  private hold(part: Buffer): void {
    if (part.length === 0) return;
    // A copy: the stream may reuse the chunk's memory once its handler returns.
    this.pending.push(Buffer.from(part));
    this.pendingBytes += part.length;
  }
}

// Lines of at most `max` bytes (a longer line in pieces of at most `max`), newlines kept.
function pieces(text: Buffer, max: number): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  while (start < text.length) {
    const newline = text.indexOf(0x0a, start);
    const end = newline >= 0 && newline < start + max ? newline + 1 : start + cutPoint(text.subarray(start), max);
    out.push(text.subarray(start, end));
    start = end;
  }
  return out;
}

// Where to end a piece of a long line (`text` from the piece's start): at `max`, or earlier,
// after the last blank of its last KiB (a token, or a --redact match such as token=\S+,
// seldom holds one), and never inside an env file's value: the cut moves back to the start
// of one it would split. A pattern's match with no blank near the cut can still be split.
export function cutPoint(text: Buffer, max: number): number {
  if (text.length <= max) return text.length;
  let cut = max;
  for (let i = max - 1; i >= max - BLANK_WINDOW && i > 0; i--) {
    if (text[i] === 0x20 || text[i] === 0x09 || text[i] === 0x0d) {
      cut = i + 1;
      break;
    }
  }
  const secrets = maskedValues().map((value) => Buffer.from(value));
  for (let moved = true; moved; ) {
    moved = false;
    for (const secret of secrets) {
      const at = straddling(text, cut, secret);
      // At 0 it starts the piece: a value longer than a piece is cut where it must be.
      if (at > 0) {
        cut = at;
        moved = true;
      }
    }
  }
  return cut;
}

// Output that is not UTF-8 is masked byte for byte, so that what no pattern matched passes
// on unchanged, not with its stray bytes replaced.
function mask(text: Buffer): Buffer {
  const utf8 = isUtf8(text);
  const before = text.toString(utf8 ? 'utf8' : 'latin1');
  const after = maskSecrets(before, !utf8);
  return after === before ? text : Buffer.from(after, utf8 ? 'utf8' : 'latin1');
}

// Where `secret` starts if it runs across `cut`, or -1. At the end of what has come so far
// its beginning alone counts: the rest may be in the next read.
function straddling(text: Buffer, cut: number, secret: Buffer): number {
  for (let p = Math.max(0, cut - secret.length + 1); p < cut; p++) {
    const end = Math.min(p + secret.length, text.length);
    if (text.subarray(p, end).equals(secret.subarray(0, end - p))) return p;
  }
  return -1;
}
