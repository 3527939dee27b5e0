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
