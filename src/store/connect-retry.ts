import { sleep } from '../util/io.js';
import { monotonicMs } from '../util/time.js';

const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 1000;

export interface RetryOptions {
  // How long to keep retrying while the server is busy (no free connection).
  readonly retryForMs: number;
  readonly onRetry?: (retry: number, delayMs: number, reason: string) => void;
  // A signal to cronguard: stops connecting, and waiting to, at once.
  readonly abort?: AbortSignal;
}

// One try at a session: the session, or why not: `busy` says why the server had no room
// (and it is worth another try), `failure` the error to end with after `retries` retries.
export type Attempt<T> = { readonly session: T } | { readonly busy: string | null; failure(retries: number): Error };

// A dedicated session of either server dialect, retried after a jittered, growing delay
// while the server is out of connections (a fleet connecting at the top of the minute), up
// to retryForMs.
export async function connectRetrying<T>(options: RetryOptions, attempt: () => Promise<Attempt<T>>): Promise<T> {
  const deadline = monotonicMs() + options.retryForMs;
  for (let retry = 1; ; retry++) {
    options.abort?.throwIfAborted();
    const tried = await attempt();
    if ('session' in tried) return tried.session;
    const delay = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (retry - 1)) * (0.5 + Math.random() / 2);
    if (tried.busy === null || monotonicMs() + delay > deadline) throw tried.failure(retry - 1);
    options.onRetry?.(retry, Math.round(delay), tried.busy);
    await sleep(delay, options.abort);
  }
}
