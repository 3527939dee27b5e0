import { createRequire } from 'node:module';

// SHA-256 of a UTF-8 string. node:crypto is loaded on first use only: most runs name their
// job with -n and use a file lock, and never need it.
export function sha256(text: string): Buffer {
  const { createHash } = createRequire(import.meta.url)('node:crypto') as typeof import('node:crypto');
  return createHash('sha256').update(text).digest();
}
