import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha256 } from '../../src/util/sha256.js';

const reference = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

describe('sha256 (plain JavaScript, so that a run need not load node:crypto)', () => {
  it('matches node:crypto on the FIPS test vectors', () => {
    expect(sha256('').toString('hex')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256('abc').toString('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq').toString('hex')).toBe(
      '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
    );
  });

  it('matches node:crypto at every length around the block boundaries, and on non-ASCII text', () => {
    for (let length = 0; length <= 200; length++) {
      const text = 'x'.repeat(length);
      expect(sha256(text).toString('hex'), `length ${length}`).toBe(reference(text));
    }
    for (const text of ['cronguard:backup', 'cronguard:sch:job', 'héllo wörld ✓ 日本', '\0a\0b', 'x'.repeat(100_000)]) {
      expect(sha256(text).toString('hex')).toBe(reference(text));
    }
    for (let i = 0; i < 200; i++) {
      const text = randomBytes(1 + (i % 150)).toString('latin1');
      expect(sha256(text).toString('hex')).toBe(reference(text));
    }
  });
});
