// A promise timer. Deliberately not node:timers/promises, whose load is a measurable part of
// cronguard's start-up.
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
