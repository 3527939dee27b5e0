import { sleep } from '../util/sleep.js';

const FIRST_DELAY_MS = 25;
const MAX_DELAY_MS = 250;

// Retries a non-blocking acquisition until it succeeds or `waitMs` runs out. Polling (rather
// than a blocking call on a worker thread) keeps the deadline exact and the process killable.
export async function retryUntil<T>(attempt: () => Promise<T | null> | T | null, waitMs: number): Promise<T | null> {
  const deadline = Date.now() + waitMs;
  let delay = FIRST_DELAY_MS;
  for (;;) {
    const held = await attempt();
    if (held !== null) return held;
    const left = deadline - Date.now();
    if (left <= 0) return null;
    await sleep(Math.min(delay, left));
    delay = Math.min(delay * 2, MAX_DELAY_MS);
  }
}
