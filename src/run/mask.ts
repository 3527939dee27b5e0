import { isUtf8 } from 'node:buffer';
import { maskSecrets } from '../util/redact.js';

// Masks a stream of output (--redact, --env-file) before anything sees it: the pass-through,
// the run log's tail, the live copy for `logs -f`, -q's replay, the ping's body. Loaded only
// when masking is configured.

// A line is masked whole, so a secret that a pipe's read splits in two is still found. A
// line longer than this is masked in pieces of this size (a secret across such a cut is
// not found): memory stays bounded whatever the command prints without a newline.
export const MAX_LINE_BYTES = 64 * 1024;

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
      return this.pendingBytes >= this.maxLine ? this.end() : null;
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

  private hold(part: Buffer): void {
    if (part.length === 0) return;
    // A copy: the stream may reuse the chunk's memory once its handler returns.
    this.pending.push(Buffer.from(part));
    this.pendingBytes += part.length;
  }
}

// Lines of at most `max` bytes (a longer line in pieces of `max`), newlines kept.
function pieces(text: Buffer, max: number): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  while (start < text.length) {
    const newline = text.indexOf(0x0a, start);
    const end = Math.min(newline < 0 ? text.length : newline + 1, start + max);
    out.push(text.subarray(start, end));
    start = end;
  }
  return out;
}

// Output that is not UTF-8 is masked byte for byte, so that what no pattern matched passes
// on unchanged, not with its stray bytes replaced.
function mask(text: Buffer): Buffer {
  const utf8 = isUtf8(text);
  const before = text.toString(utf8 ? 'utf8' : 'latin1');
  const after = maskSecrets(before, !utf8);
  return after === before ? text : Buffer.from(after, utf8 ? 'utf8' : 'latin1');
}
