import { describe, expect, it } from 'vitest';
import { StderrRule } from '../../src/run/stderr-rule.js';

// The first offending line of `text`, fed in the given pieces.
function judged(text: string, ps4 = '+ ', cuts: readonly number[] = []): string | null {
  const bytes = Buffer.from(text);
  const rule = new StderrRule(ps4);
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    rule.push(bytes.subarray(from, cut));
    from = cut;
  }
  return rule.end();
}

describe('StderrRule', () => {
  const cases: [string, string, string | null][] = [
    ['nothing', '', null],
    ['trace lines, nested', '+ a\n++ b\n+++ c\n+ d', null],
    ['a complaint after a trace', '+ a\noops\n+ b\n', 'oops'],
    ['a plus without the space', '+a\n', '+a'],
    ['an empty line', '+ a\n\n', '(an empty line)'],
    ['a last line without a newline', '+ a\nwarning', 'warning'],
    ['a CRLF line', 'warning\r\n', 'warning'],
    ['control characters, made printable', '\x1b[2Jgone\n', '\\x1b[2Jgone'],
  ];

  it.each(cases)('%s: the same however the text is split', (_what, text, expected) => {
    expect(judged(text)).toBe(expected);
    for (let cut = 0; cut <= Buffer.byteLength(text); cut++) expect(judged(text, '+ ', [cut])).toBe(expected);
  });

  it('takes PS4 literally: its first character repeats, the rest follows, a multi-byte one too', () => {
    expect(judged('>> a\n>>> b\n', '>> ')).toBeNull();
    expect(judged('+ a\n', '>> ')).toBe('+ a');
    expect(judged('» a\n»» b\n', '» ')).toBeNull();
    expect(judged('++ a\n+++ b\n', '++ ')).toBeNull();
    expect(judged('+anything\n', '+')).toBeNull();
    // An empty PS4 is read as the default.
    expect(judged('+ a\nb\n', '')).toBe('b');
  });

  it('judges a long line by its head, whole or split, and shows at most 120 characters', () => {
    const trace = `+ ${'x'.repeat(5000)}\n`;
    expect(judged(trace)).toBeNull();
    expect(judged(trace, '+ ', [1, 2000, 4000])).toBeNull();
    const long = `${'y'.repeat(5000)}\n`;
    expect(judged(long)).toBe(`${'y'.repeat(120)}...`);
    expect(judged(long, '+ ', [3000])).toBe(`${'y'.repeat(120)}...`);
  });
});
