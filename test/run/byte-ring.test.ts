import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ByteRing } from '../../src/run/supervisor/byte-ring.js';

describe('ByteRing (the tail and the live copy hold output in it, not in the chunks read)', () => {
  it('keeps the last `capacity` bytes when evicting, whatever the chunk sizes', () => {
    for (const capacity of [1, 7, 64, 1000]) {
      const ring = new ByteRing(capacity);
      let all = Buffer.alloc(0);
      for (let i = 0; i < 300; i++) {
        const chunk = randomBytes(i % 5 === 0 ? capacity * 2 + 3 : i % 17);
        all = Buffer.concat([all, chunk]);
        ring.push(chunk, true);
        expect(Buffer.concat(ring.views())).toEqual(all.subarray(Math.max(0, all.length - capacity)));
      }
    }
  });

  it('without evicting, refuses what does not fit and hands out what it holds in order, as it is consumed', () => {
    const ring = new ByteRing(100);
    let model = Buffer.alloc(0);
    for (let i = 0; i < 2000; i++) {
      const chunk = randomBytes(i % 37);
      const fits = model.length + chunk.length <= 100;
      expect(ring.push(chunk, false)).toBe(fits);
      if (fits) model = Buffer.concat([model, chunk]);
      if (i % 3 === 0) {
        const n = i % 41;
        ring.consume(n);
        model = model.subarray(Math.min(n, model.length));
      }
      expect(ring.length).toBe(model.length);
      expect(Buffer.concat(ring.views())).toEqual(model);
    }
  });

  it('does not write over bytes handed out for a write in flight', () => {
    const ring = new ByteRing(10);
    ring.push(Buffer.from('abcdefgh'), false);
    ring.consume(6);
    ring.push(Buffer.from('ijk'), false);
    const inFlight = ring.views();
    expect(Buffer.concat(inFlight).toString()).toBe('ghijk');
    expect(ring.push(Buffer.from('lmnop'), false)).toBe(true);
    expect(ring.push(Buffer.from('q'), false)).toBe(false);
    expect(Buffer.concat(inFlight).toString()).toBe('ghijk');
    ring.consume(5);
    expect(Buffer.concat(ring.views()).toString()).toBe('lmnop');
  });

  it('holds nothing with capacity 0, and makes no buffer until the first byte', () => {
    const ring = new ByteRing(0);
    expect(ring.push(Buffer.from('x'), true)).toBe(false);
    expect(ring.views()).toEqual([]);
    expect(new ByteRing(1 << 30).views()).toEqual([]);
  });
});
