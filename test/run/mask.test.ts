import { describe, expect, it } from 'vitest';
import { LineMasker } from '../../src/run/supervisor/mask.js';
import { addMaskedValue, addPattern, MIN_MASKED_LENGTH, maskSecrets, redact } from '../../src/util/redact.js';

const SECRET = 'hunter2-secret-value';
addMaskedValue(SECRET);
addMaskedValue('short');
addMaskedValue('-----BEGIN KEY-----\nline-of-key-material\n-----END KEY-----');
addPattern(/card=\d{4}/g);

// Everything a masker passes on for these chunks, its end included.
function through(masker: LineMasker, chunks: readonly Buffer[]): Buffer {
  const out = chunks.map((c) => masker.push(c)).filter((b): b is Buffer => b !== null);
  const rest = masker.end();
  return Buffer.concat(rest ? [...out, rest] : out);
}

describe('masking streamed output', () => {
  it('finds a secret however the reads cut it', () => {
    const text = Buffer.from(`before ${SECRET} card=1234 after\nnext ${SECRET}`);
    for (let cut = 1; cut < text.length; cut++) {
      for (let second = cut + 1; second <= text.length; second += 7) {
        const chunks = [text.subarray(0, cut), text.subarray(cut, second), text.subarray(second)];
        expect(through(new LineMasker(), chunks).toString(), `cut at ${cut}, ${second}`).toBe('before *** *** after\nnext ***');
      }
    }
  });

  it('holds at most a line, and masks a longer one in pieces', () => {
    const masker = new LineMasker(16);
    expect(masker.push(Buffer.from('0123456789'))).toBeNull();
    // A piece of 16 is passed on; the rest of the line waits for more.
    expect(masker.push(Buffer.from('abcdefghij'))?.toString()).toBe('0123456789abcdef');
    expect(masker.push(Buffer.from(`x\n${'y'.repeat(40)}\nz`))?.toString()).toBe(`ghijx\n${'y'.repeat(40)}\n`);
    expect(masker.end()?.toString()).toBe('z');
    expect(masker.end()).toBeNull();
  });

  it('never cuts a long line inside a secret: after a blank near the end, else before the value', () => {
    for (const max of [32, 64, 200]) {
      for (let at = 0; at < max + 10; at++) {
        const line = `${'x'.repeat(at)}${SECRET}${'z'.repeat(max)}\n`;
        const spaced = `${'x'.repeat(at)} card=1234 ${'z'.repeat(max)}\n`;
        const split = (text: string) => [Buffer.from(text.slice(0, max + 3)), Buffer.from(text.slice(max + 3))];
        for (const chunks of [[Buffer.from(line)], split(line)]) {
          expect(through(new LineMasker(max), chunks).toString(), `${max} ${at}`).toBe(`${'x'.repeat(at)}***${'z'.repeat(max)}\n`);
        }
        for (const chunks of [[Buffer.from(spaced)], split(spaced)]) {
          expect(through(new LineMasker(max), chunks).toString(), `${max} ${at}`).toBe(`${'x'.repeat(at)} *** ${'z'.repeat(max)}\n`);
        }
      }
    }
  });

  it('passes bytes that are not UTF-8 on unchanged, masking around them', () => {
    const bytes = Buffer.concat([Buffer.from([0xff, 0x20]), Buffer.from(SECRET), Buffer.from([0x20, 0xfe, 0x0a])]);
    expect(through(new LineMasker(), [bytes])).toEqual(Buffer.from([0xff, 0x20, 0x2a, 0x2a, 0x2a, 0x20, 0xfe, 0x0a]));
  });

  it('masks each line of a multi-line value, and no value under the minimum', () => {
    expect(MIN_MASKED_LENGTH).toBe(6);
    expect(maskSecrets('a short one')).toBe('a short one');
    expect(maskSecrets('  line-of-key-material\n')).toBe('  ***\n');
    expect(redact(`cronguard: ${SECRET} card=9876`)).toBe('cronguard: *** ***');
  });
});
