import { hostname } from 'node:os';
import type { Context } from 'hono';
import type { RunRow } from '../store/types.js';
import { validateName } from '../util/name.js';
import { isSameProcess } from '../util/process-id.js';
import type { Csrf } from './csrf.js';
import type { StoreAccess } from './store-access.js';
import { errorPage } from './views/layout.js';
import type { Watcher } from './watcher.js';

// What every route of one server shares.
export interface ServeContext {
  readonly store: StoreAccess;
  readonly csrf: Csrf;
  readonly watcher: Watcher;
  // Aborted when the server stops, ending the event streams it holds open.
  readonly stopping: AbortSignal;
}

// A 404 page (or JSON for the API), saying what was not found.
export function notFound(c: Context, what: string): Response | Promise<Response> {
  if (c.req.path.startsWith('/api/')) return c.json({ error: what }, 404);
  return c.html(errorPage('Not found', what), 404);
}

export function badRequest(c: Context, what: string): Response | Promise<Response> {
  if (c.req.path.startsWith('/api/')) return c.json({ error: what }, 400);
  return c.html(errorPage('Bad request', what), 400);
}

// Whether a text field holds a NUL, which PostgreSQL's text cannot store and no command
// line can carry: bad input, refused (400, naming the field) before it reaches the log.
export function hasNul(value: unknown): boolean {
  return typeof value === 'string' && value.includes('\0');
}

// A run or request id as the URL gives it: digits, not too many; null otherwise.
export function idOf(text: string | undefined): number | null {
  return text !== undefined && /^\d{1,15}$/.test(text) && Number(text) > 0 ? Number(text) : null;
}

// The job a URL names, or null when it cannot be one (so: not found).
export function nameOf(c: Context): string | null {
  try {
    return validateName(c.req.param('name') ?? '');
  } catch {
    return null;
  }
}

// A running row whose wrapper on this host is gone (SIGKILL) stays `running` until the next
// run of the job marks it abandoned; there is nothing more to follow, as for `logs -f`.
export function wrapperAlive(row: RunRow): boolean {
  return row.host !== hostname() || isSameProcess(row.pid, row.wrapper_start);
}
