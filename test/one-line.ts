import { expect } from 'vitest';

// The one line cronguard says on stderr (a refusal, an error), checked to be one.
export function oneLine(stderr: string): string {
  const all = stderr.trim().split('\n');
  expect(all).toHaveLength(1);
  return all[0] as string;
}
