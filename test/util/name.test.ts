import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { deriveName, validateName } from '../../src/util/name.js';

describe('validateName', () => {
  it.each(['backup', 'db.vacuum', 'app:nightly', 'a', 'user@host', 'x_1-2+3', 'A'.repeat(100)])('accepts %s', (name) => {
    expect(validateName(name)).toBe(name);
  });

  it.each([
    ['', /empty/],
    ['../../etc/x', /invalid job name/],
    ['a/b', /invalid job name/],
    ['..', /invalid job name/],
    ['.hidden', /invalid job name/],
    ['-n', /invalid job name/],
    ['with space', /invalid job name/],
    ['tab\there', /invalid job name/],
    ['A'.repeat(101), /101 characters long; the limit is 100/],
    ['x'.repeat(10_240), /10240 characters long/],
  ])('rejects %j', (name, message) => {
    expect(() => validateName(name)).toThrow(UsageError);
    expect(() => validateName(name)).toThrow(message);
  });
});

describe('deriveName', () => {
  it('is the basename and the first 8 hex of sha256 over the NUL-joined argv', () => {
    const argv = ['/usr/local/bin/backup.sh', '--full', 'x y'];
    const hash = createHash('sha256').update(argv.join('\0')).digest('hex').slice(0, 8);
    expect(deriveName(argv)).toBe(`backup.sh-${hash}`);
  });

  it('differs when the arguments differ', () => {
    expect(deriveName(['echo', 'a'])).not.toBe(deriveName(['echo', 'b']));
  });

  it('always yields a valid name, whatever the program is called', () => {
    for (const argv of [['/tmp/my script!'], ['..'], ['-x'], ['é'], ['']]) {
      expect(validateName(deriveName(argv))).toBe(deriveName(argv));
    }
  });
});
