import type { Hono } from 'hono';
import { exposition } from '../metrics/exposition.js';
import { withScheduleProblem } from '../schedule/job.js';
import { withLeases } from '../store/leases.js';
import { argsProblem } from '../store/requests.js';
import { withSlots } from '../store/slot-holders.js';
import { RUN_STATUSES, type RunStatus } from '../store/types.js';
import { badRequest, hasNul, idOf, nameOf, notFound, type ServeContext } from './context.js';

const MAX_LIMIT = 1000;

// The JSON API, in the shapes of the CLI's --json (status, history, requests), and the
// Prometheus exposition of `cronguard metrics`.
export function apiRoutes(app: Hono, ctx: ServeContext): void {
  // The shape of `cronguard status --json`, leases and schedule problems included.
  app.get('/api/jobs', async (c) => c.json(await ctx.store.read(async (s) => withScheduleProblem(await withSlots(s, await withLeases(s, await s.jobStatus(null))), Date.now()), [])));

  app.get('/api/jobs/:name/runs', async (c) => {
    const name = nameOf(c);
    if (name === null) return badRequest(c, 'not a job name');
    const limit = c.req.query('limit') === undefined ? 20 : idOf(c.req.query('limit'));
    const status = c.req.query('status');
    const before = c.req.query('before');
    if (limit === null || limit > MAX_LIMIT) return badRequest(c, `limit: a whole number from 1 to ${MAX_LIMIT}`);
    if (status !== undefined && !(RUN_STATUSES as readonly string[]).includes(status)) return badRequest(c, `status: one of ${RUN_STATUSES.join(', ')}`);
    if (before !== undefined && idOf(before) === null) return badRequest(c, 'before: a run id');
    if (hasNul(c.req.query('host'))) return badRequest(c, 'host: a host name, without NUL characters');
    const filter = { jobs: [name], limit, status: status as RunStatus | undefined, host: c.req.query('host') || undefined, beforeId: idOf(before) ?? undefined };
    // Without their output (/api/runs/ID has it): a thousand runs' would be gigabytes.
    const runs = await ctx.store.read((s) => s.listRuns(filter), []);
    return c.json(runs.map(({ output: _, ...run }) => run));
  });

  app.get('/api/runs/:id', async (c) => {
    const id = idOf(c.req.param('id'));
    if (id === null) return badRequest(c, 'not a run id');
    const run = await ctx.store.read((s) => s.getRun(id), null);
    return run ? c.json(run) : notFound(c, `no run ${id}`);
  });

  app.get('/api/requests/:id', async (c) => {
    const id = idOf(c.req.param('id'));
    if (id === null) return badRequest(c, 'not a request id');
    const request = await ctx.store.read((s) => s.getRequest(id), null);
    return request ? c.json(request) : notFound(c, `no request ${id}`);
  });

  // {"args": [...], "by": "..."}, both optional; answers {"id": N}, as `cronguard request`
  // prints it. A job the log has never seen may be asked for: its first run serves it.
  app.post('/api/jobs/:name/requests', async (c) => {
    const name = nameOf(c);
    if (name === null) return badRequest(c, 'not a job name');
    const body = (await c.req.json().catch(() => null)) as { args?: unknown; by?: unknown } | null;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return badRequest(c, 'the body must be a JSON object: {"args": [...], "by": "..."}');
    const args = body.args ?? [];
    if (!Array.isArray(args) || args.length > MAX_LIMIT || argsProblem(args) !== null || args.some((a: string) => a.length > 10_000)) {
      return badRequest(c, 'args: a list of strings without NUL characters');
    }
    if (body.by !== undefined && (typeof body.by !== 'string' || body.by.length > 200 || hasNul(body.by))) {
      return badRequest(c, 'by: a string of at most 200 characters, without NUL characters');
    }
    const by = typeof body.by === 'string' ? body.by : 'api';
    const id = await ctx.store.write((s) => s.addRequest({ job: name, args: args as string[], notBefore: new Date(), requestedBy: by }));
    return c.json({ id }, 201);
  });

  app.get('/metrics', async (c) => {
    const jobs = await ctx.store.read((s) => s.jobStatus(null), []);
    return c.body(await exposition(jobs), 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
  });
}

