import { hostname } from 'node:os';
import type { Context, Hono } from 'hono';
import { type Stopping, stopRun } from '../run/stop/stop-run.js';
import type { RunRow } from '../store/types.js';
import { badRequest, idOf, nameOf, notFound, type ServeContext } from './context.js';
import { requester } from './proxy.js';

// A group whose wrapper is gone gets SIGKILL after this, as with `cronguard stop`.
const ORPHAN_KILL_AFTER_MS = 10_000;

// The Stop buttons (POST, CSRF-checked and refused on a read-only server by guard()): as
// `cronguard stop` with TERM, on a run or on every running run of a job. The page does not
// wait for the end: it goes back to the run or job, whose live view shows it come.
export function stopRoutes(app: Hono, ctx: ServeContext): void {
  app.post('/runs/:id/stop', async (c) => {
    const id = idOf(c.req.param('id'));
    if (id === null) return badRequest(c, `'${c.req.param('id')}' is not a run id.`);
    const row = await ctx.store.read((s) => s.getRun(id), null);
    if (!row) return notFound(c, `No run ${id} in the run log.`);
    const [result] = await stopAll(c, ctx, [row]);
    if (result?.state === 'not-running') return notRunning(c, `${result.why}.`);
    return c.redirect(`/runs/${id}?stopping=1`, 303);
  });
  app.post('/jobs/:name/stop', async (c) => {
    const name = nameOf(c);
    const known = name !== null && (await ctx.store.read((s) => s.jobStatus(name), [])).length > 0;
    if (!known || name === null) return notFound(c, 'There is no such job.');
    const running = await ctx.store.read((s) => s.listRuns({ jobs: [name], status: 'running', limit: 1000 }), []);
    const asked = (await stopAll(c, ctx, running)).filter((r) => r.state !== 'not-running').length;
    if (asked === 0) return notRunning(c, `${name} is not running; nothing to stop.`);
    return c.redirect(`/jobs/${encodeURIComponent(name)}?stopping=${asked}`, 303);
  });
}

function stopAll(c: Context, ctx: ServeContext, rows: readonly RunRow[]): Promise<Stopping[]> {
  const order = { signal: 'SIGTERM' as const, by: `${requester(c)} (cronguard serve on ${hostname()})`, killAfterMs: ORPHAN_KILL_AFTER_MS, shared: ctx.store.shared };
  return ctx.store.write((s) => Promise.all(rows.map((row) => stopRun(s, row, order, 0))));
}

// Nothing to stop: the page says so (409), nothing was written.
function notRunning(c: Context, what: string): Response {
  c.status(409);
  return c.text(what);
}
