import { describe, expect, it } from 'vitest';
import { parseEnvFile } from '../../src/cli/env-file.js';

describe('parseEnvFile (dotenv syntax)', () => {
  it('reads keys, export, comments, quotes, escapes and multi-line values', () => {
    const text = [
      '\uFEFF# comment',
      'A=plain',
      '  export B = spaced value   # comment',
      "C='single $HOME \\n # kept'",
      'D="tab\\there \\"q\\" back\\\\slash \\x"',
      'E="one',
      '  two  ',
      'three" # after',
      "F='a",
      "b'",
      'G=',
      'H=a#b',
      'I="  padded  "',
      'A=last',
      '',
    ].join('\r\n');
    expect(parseEnvFile(text, 'f')).toEqual({
      A: 'last',
      B: 'spaced value',
      C: 'single $HOME \\n # kept',
      D: 'tab\there "q" back\\slash \\x',
      E: 'one\n  two  \nthree',
      F: 'a\nb',
      G: '',
      H: 'a#b',
      I: '  padded  ',
    });
  });

  it.each([
    ['no equals sign', 'JUST_A_WORD\n', 'f:1: expected KEY=VALUE'],
    ['a bad name', 'A-B=1\n', "f:1: the key is not a variable name (letters, digits and _, not starting with a digit)"],
    ['a name starting with a digit', '\n9A=1\n', "f:2: the key is not a variable name (letters, digits and _, not starting with a digit)"],
    ['an unclosed double quote', 'A="open\nB=2\n', 'f:1: the value\'s opening " is never closed'],
    ['an unclosed single quote', "A='open\n", "f:1: the value's opening ' is never closed"],
    ['text after the closing quote', 'A=1\nB="x"y\n', `f:2: unexpected text after the closing " (put a comment after ' #')`],
    ['a value that is not UTF-8', 'A=\uFFFD\n', 'f:1: the value of A is not valid UTF-8'],
  ])('refuses %s, naming the line but not its text', (_what, text, message) => {
    expect(() => parseEnvFile(text, 'f')).toThrow(message);
  });
});
