import { printable } from '../util/printable.js';
import { maskSecrets } from '../util/redact.js';

// How much of the first offending line the run log's error keeps.
const SHOWN_CHARS = 120;
// How much of a line's start is kept to judge it: enough for any PS4 repeated for deep
// nesting, and for the part shown. The rest of a line is passed over, never held, so a command
// writing gigabytes to stderr (in one line or many) costs no memory here.
const HEAD_BYTES = 1024;

// --fail-on-stderr: watches the command's stderr, as it passes through, for a line that is
// not a shell's `set -x` trace, as cronic does: a trace line starts with PS4's first
// character repeated once per level of nesting, then the rest of PS4 ('+ ', '++ ', '+++ '
// for the default), PS4 read literally from the command's environment. Works on whole
// lines however the pipe splits them into chunks; once one line offends, the rest is
// not looked at.
export class StderrRule {
  private readonly first: Buffer;
  private readonly rest: Buffer;
  // The start of the line being read, up to HEAD_BYTES.
  private readonly head = Buffer.alloc(HEAD_BYTES);
  private headLength = 0;
  // Whether anything of the current line has been seen (an empty line counts as output).
  private inLine = false;
  private offending: string | null = null;

  constructor(ps4: string) {
    // An empty PS4 would make every line a trace line: bash's default is the sound reading.
    const prefix = ps4 === '' ? '+ ' : ps4;
    const firstChar = String.fromCodePoint(prefix.codePointAt(0) as number);
    this.first = Buffer.from(firstChar);
    this.rest = Buffer.from(prefix.slice(firstChar.length));
  }

  // Judges each line where it lies in the chunk, comparing bytes in place: a command that
  // writes millions of short trace lines costs no allocation per line. Only a line that
  // began in an earlier chunk is judged from its kept head.
  push(chunk: Buffer): void {
    let from = 0;
    while (this.offending === null && from < chunk.length) {
      const newline = nextNewline(chunk, from);
      const end = newline < 0 ? chunk.length : newline;
      if (newline < 0 || this.inLine) {
        this.keep(chunk, from, end);
        this.inLine = true;
        if (newline >= 0) this.endLine(this.head, 0, this.headLength);
      } else {
        // Judged, as a line split across chunks is, by its head alone.
        const head = Math.min(end, from + HEAD_BYTES);
        if (!this.isTrace(chunk, from, head)) this.offending = shown(chunk.subarray(from, head));
      }
      if (newline < 0) return;
      from = newline + 1;
    }
  }

  // The first line that is not a trace line, for the run log (truncated, printable); null
  // when every line was one, or nothing was written. Call once stderr has ended: a last
  // line without a newline is judged then.
  end(): string | null {
    if (this.offending === null && this.inLine) this.endLine(this.head, 0, this.headLength);
    return this.offending;
  }

  private keep(chunk: Buffer, from: number, end: number): void {
    const length = Math.min(end - from, HEAD_BYTES - this.headLength);
    if (length <= 0) return;
    chunk.copy(this.head, this.headLength, from, from + length);
    this.headLength += length;
  }

  private endLine(line: Buffer, start: number, end: number): void {
    if (!this.isTrace(line, start, end)) this.offending = shown(line.subarray(start, end));
    this.headLength = 0;
    this.inLine = false;
  }

  private isTrace(line: Buffer, start: number, end: number): boolean {
    const unit = this.first.length;
    let at = start;
    while (at + unit <= end && matches(line, at, this.first)) at += unit;
    if (at === start) return false;
    // A line longer than the head that is all PS4's first character: nesting too deep to
    // tell, so taken for what it most likely is.
    if (at === end && end - start === HEAD_BYTES) return true;
    // The rest of PS4 may itself start with its first character ('++ '): back off as needed.
    for (let level = at; level > start; level -= unit) {
      if (level + this.rest.length <= end && matches(line, level, this.rest)) return true;
    }
    return false;
  }
}

// Where the next newline is, or -1. A loop in JavaScript, not indexOf(): with lines of a
// few bytes (a trace of a tight loop), a native call per line costs several times more.
function nextNewline(chunk: Buffer, from: number): number {
  for (let i = from; i < chunk.length; i++) if (chunk[i] === 0x0a) return i;
  return -1;
}

// Whether `buffer` holds `part` at `at` (the caller checked that it fits).
function matches(buffer: Buffer, at: number, part: Buffer): boolean {
  for (let i = 0; i < part.length; i++) if (buffer[at + i] !== part[i]) return false;
  return true;
}

// Masked first, then escaped and cut: a secret holding a tab or a quote, or straddling the
// cut, no longer matches once escaped or cut, and would reach the run log's error in part.
function shown(line: Buffer): string {
  const text = printable(maskSecrets(line.toString('utf8').replace(/\r$/, '')));
  if (text === '') return '(an empty line)';
  return text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS)}...` : text;
}
