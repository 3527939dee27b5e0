import { StringDecoder } from 'node:string_decoder';
import { html } from 'hono/html';

// A command's output as HTML: text escaped, ANSI SGR colours and weights as spans with
// classes (the page's CSP allows no inline styles), every other escape sequence and
// control character dropped. It is a stream: a sequence or a UTF-8 character split between
// two chunks of live output comes out whole, and so does one split where a page picked up
// a running output (the part it already shows is skipped, which sets the state only).

interface Style {
  fg: number | null;
  bg: number | null;
  bold: boolean;
  dim: boolean;
  italic: boolean;
  underline: boolean;
}

const PLAIN: Style = { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false };
// CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), a character set designation (ESC ( B,
// which `tput sgr0` sends on xterm), or a two-character escape. An OSC (a title, a link)
// never spans lines in practice: one that meets a line break or another escape before its
// BEL or ST ends there, rather than hiding every line up to the next BEL.
const SEQUENCE = /\x1b(?:\[([0-9;:?<=>]*)[ -/]*([@-~])|\][^\x07\x1b\n\r]*(?:\x07|\x1b\\)?|[()*+][ -~]|[@-Z\\^_])/g;
// A sequence that may still be going on at the end of a chunk.
const UNFINISHED = /\x1b(?:\[[0-9;:?<=>]*[ -/]*|\][^\x07\x1b\n\r]*\x1b?|[()*+])?$/;

export class AnsiHtml {
  private style: Style = { ...PLAIN };
  private carry = '';
  private readonly decoder = new StringDecoder('utf8');

  push(chunk: Buffer | string): string {
    return this.render(this.complete(chunk), true);
  }

  // Output already shown: its colours and anything it leaves unfinished carry on.
  skip(chunk: Buffer | string): void {
    this.render(this.complete(chunk), false);
  }

  // The chunk after what was held back, less what it leaves unfinished.
  private complete(chunk: Buffer | string): string {
    const text = this.carry + (typeof chunk === 'string' ? chunk : this.decoder.write(chunk));
    const tail = UNFINISHED.exec(text);
    const cut = tail && tail[0].length < 256 ? tail.index : text.length;
    this.carry = text.slice(cut);
    return text.slice(0, cut);
  }

  end(): string {
    const rest = this.carry + this.decoder.end();
    this.carry = '';
    return this.render(rest, true);
  }

  private render(text: string, shown: boolean): string {
    let out = '';
    let at = 0;
    for (const match of text.matchAll(SEQUENCE)) {
      if (shown) out += this.span(text.slice(at, match.index));
      if (match[2] === 'm') this.apply(match[1] ?? '');
      at = match.index + match[0].length;
    }
    return shown ? out + this.span(text.slice(at)) : '';
  }

  private span(text: string): string {
    // Carriage returns of progress bars become line breaks; other controls go.
    const clean = text.replace(/\r\n/g, '\n').replace(/\r/g, '\n').replace(/[\x00-\x08\x0b-\x1f\x7f\x1b]/g, '');
    if (clean === '') return '';
    const escaped = String(html`${clean}`);
    const s = this.style;
    const classes = [
      s.fg === null ? '' : `fg${s.fg}`, s.bg === null ? '' : `bg${s.bg}`,
      s.bold ? 'b' : '', s.dim ? 'dim' : '', s.italic ? 'i' : '', s.underline ? 'u' : '',
    ].filter(Boolean);
    return classes.length === 0 ? escaped : `<span class="${classes.join(' ')}">${escaped}</span>`;
  }

  // SGR parameters: resets, weights, the 16 colours (256-colour and true-colour values map
  // to the nearest of those 16 where they are in the 16-colour part, else are ignored).
  private apply(params: string): void {
    const codes = params === '' ? [0] : params.split(/[;:]/).map((p) => Number(p) || 0);
    for (let i = 0; i < codes.length; i++) {
      const c = codes[i] as number;
      if (c === 0) this.style = { ...PLAIN };
      else if (c === 1) this.style.bold = true;
      else if (c === 2) this.style.dim = true;
      else if (c === 3) this.style.italic = true;
      else if (c === 4) this.style.underline = true;
      else if (c === 22) this.style.bold = this.style.dim = false;
      else if (c === 23) this.style.italic = false;
      else if (c === 24) this.style.underline = false;
      else if (c >= 30 && c <= 37) this.style.fg = c - 30;
      else if (c >= 90 && c <= 97) this.style.fg = c - 82;
      else if (c === 39) this.style.fg = null;
      else if (c >= 40 && c <= 47) this.style.bg = c - 40;
      else if (c >= 100 && c <= 107) this.style.bg = c - 92;
      else if (c === 49) this.style.bg = null;
      else if (c === 38 || c === 48) {
        const index = codes[i + 1] === 5 ? codes[i + 2] : undefined;
        i += codes[i + 1] === 5 ? 2 : codes[i + 1] === 2 ? 4 : 0;
        if (index !== undefined && index < 16) this.style[c === 38 ? 'fg' : 'bg'] = index;
      }
    }
  }
}

// A whole stored output at once, or its part from `from` on: what stands before is read
// for its state only (the colour it sets, a sequence or character split at `from`).
export function ansiToHtml(text: string, from = 0): string {
  const a = new AnsiHtml();
  if (from > 0) a.skip(text.slice(0, from));
  return a.push(from > 0 ? text.slice(from) : text) + a.end();
}
