import { printable } from '../util/printable.js';

// How much of the first offending line the run log's error keeps.
const SHOWN_CHARS = 120;
// How much of a line's start is kept to judge it: enough for any PS4 repeated for deep
// nesting, and for the part shown. The rest of a line is counted, never held, so a command
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
  private head = Buffer.alloc(HEAD_BYTES);
  private headLength = 0;
  // Whether anything of the current line has been seen (an empty line counts as output).
  private inLine = false;
  private offending: string | null = null;

  constructor(ps4: string) {
    // An empty PS4 makes every line a "trace line"; bash's default then is the sound reading.
    const prefix = ps4 === '' ? '+ ' : ps4;
    const firstChar = String.fromCodePoint(prefix.codePointAt(0) as number);
    this.first = Buffer.from(firstChar);
    this.rest = Buffer.from(prefix.slice(firstChar.length));
  }

  push(chunk: Buffer): void {
    if (this.offending !== null) return;
    let from = 0;
    while (from < chunk.length) {
      const newline = chunk.indexOf(0x0a, from);
      const end = newline < 0 ? chunk.length : newline;
      this.keep(chunk.subarray(from, end));
      this.inLine = true;
      if (newline < 0) return;
      this.endLine();
      if (this.offending !== null) return;
      from = newline + 1;
    }
  }

  // The first line that is not a trace line, for the run log (truncated, printable); null
  // when every line was one, or nothing was written. Call once stderr has ended: a last
  // line without a newline is judged then.
  end(): string | null {
    if (this.offending === null && this.inLine) this.endLine();
    return this.offending;
  }

  private keep(part: Buffer): void {
    const room = HEAD_BYTES - this.headLength;
    if (room <= 0 || part.length === 0) return;
    const taken = part.subarray(0, room);
    taken.copy(this.head, this.headLength);
    this.headLength += taken.length;
  }

  private endLine(): void {
    const line = this.head.subarray(0, this.headLength);
    if (!this.isTrace(line)) this.offending = shown(line);
    this.headLength = 0;
    this.inLine = false;
    if (this.offending !== null) this.head = Buffer.alloc(0);
  }

  private isTrace(line: Buffer): boolean {
    const unit = this.first.length;
    let at = 0;
    while (at + unit <= line.length && line.subarray(at, at + unit).equals(this.first)) at += unit;
    if (at === 0) return false;
    // A line longer than the head that is all PS4's first character: nesting too deep to
    // tell, so taken for what it most likely is.
    if (at === line.length && line.length === HEAD_BYTES) return true;
    // The rest of PS4 may itself start with its first character ('++ '): back off as needed.
    for (let level = at; level >= unit; level -= unit) {
      if (line.subarray(level, level + this.rest.length).equals(this.rest)) return true;
    }
    return false;
  }
}

function shown(line: Buffer): string {
  const text = printable(line.toString('utf8').replace(/\r$/, ''));
  if (text === '') return '(an empty line)';
  return text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS)}...` : text;
}
