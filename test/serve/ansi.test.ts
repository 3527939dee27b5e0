import { describe, expect, it } from 'vitest';
import { AnsiHtml, ansiToHtml } from '../../src/serve/ansi.js';

describe('ANSI output as HTML', () => {
  it('escapes text and turns SGR colours into classes', () => {
    expect(ansiToHtml('<a href="x">&\'</a>')).toBe('&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;');
    expect(ansiToHtml('\x1b[1;31mbold red\x1b[0m plain \x1b[92mbright\x1b[39m')).toBe('<span class="fg1 b">bold red</span> plain <span class="fg10">bright</span>');
    expect(ansiToHtml('\x1b[38;5;4mindexed\x1b[38;2;1;2;3m true\x1b[m')).toBe('<span class="fg4">indexed</span><span class="fg4"> true</span>');
  });

  it('drops other escape sequences and control characters', () => {
    expect(ansiToHtml('a\x1b[2Kb\x1b]0;title\x07c\x07d\x00e\r\nf\rg')).toBe('abcde\nf\ng');
    // `tput sgr0` on xterm: a character set designation, then SGR 0.
    expect(ansiToHtml('\x1b[31mred\x1b(B\x1b[m plain \x1b)0x')).toBe('<span class="fg1">red</span> plain x');
    const split = new AnsiHtml();
    expect([split.push('a\x1b('), split.push('Bb'), split.end()].join('')).toBe('ab');
  });

  it('keeps a sequence or a character split between chunks whole', () => {
    const a = new AnsiHtml();
    const euro = Buffer.from('€');
    const parts = [a.push('x\x1b[3'), a.push('1my'), a.push(euro.subarray(0, 1)), a.push(Buffer.concat([euro.subarray(1), Buffer.from('\x1b')])), a.push('[0mz'), a.end()];
    expect(parts.join('')).toBe('x<span class="fg1">y</span><span class="fg1">€</span>z');
  });
});

describe('ANSI output that a terminal would not finish', () => {
  it('ends an OSC without its BEL or ST at the line break, so the lines after it show', () => {
    expect(ansiToHtml('a\x1b]0;title\nline 2\nline 3\x07end')).toBe('a\nline 2\nline 3end');
    expect(ansiToHtml('\x1b]0;title\x1b[31mred\x1b[0m')).toBe('<span class="fg1">red</span>');
    // Terminated ones, and an OSC 8 link around its text, still go whole.
    expect(ansiToHtml('\x1b]8;;https://x.example/\x1b\\link\x1b]8;;\x1b\\ \x1b]2;t\x07ok')).toBe('link ok');
    const split = new AnsiHtml();
    expect([split.push('a\x1b]0;ti'), split.push('tle\nb'), split.end()].join('')).toBe('a\nb');
  });
});

describe('ANSI output picked up part way', () => {
  it('skipped output sets the colour and holds the split character or sequence for what follows', () => {
    const euro = Buffer.from('€');
    const a = new AnsiHtml();
    a.skip(Buffer.concat([Buffer.from('\x1b[31mred '), euro.subarray(0, 1)]));
    expect(a.push(Buffer.concat([euro.subarray(1), Buffer.from(' still red\x1b[0m\n')]))).toBe('<span class="fg1">€ still red</span>\n');
    const b = new AnsiHtml();
    b.skip('x\x1b[1;3');
    expect(b.push('2mgreen\x1b[0m') + b.end()).toBe('<span class="fg2 b">green</span>');
  });
});
