import { hostname } from 'node:os';
import type { Context, Hono } from 'hono';
import { html } from 'hono/html';
import { CronguardError, UsageError } from '../errors.js';
import { liveDir, liveName } from '../run/supervisor/live-file.js';
import { LiveReader } from '../run/supervisor/live-reader.js';
import { parseSchedule } from '../schedule/spec.js';
import { PAUSE_EVENTS_SHOWN } from '../store/jobs.js';
import { withLeases } from '../store/leases.js';
import { argsProblem } from '../store/requests.js';
import { withSlots } from '../store/slot-holders.js';
import { RUN_STATUSES, type RunRow, type RunStatus } from '../store/types.js';
import { AnsiHtml, ansiToHtml } from './ansi.js';
import { badRequest, hasNul, idOf, nameOf, notFound, type ServeContext, wrapperAlive } from './context.js';
import { requester } from './proxy.js';
import { jobView, RUNS_PER_PAGE } from './views/job.js';
import { jobsQuery, jobsTitle, jobsView } from './views/jobs.js';
import { page } from './views/layout.js';
import { fleetBanner } from './views/pauses.js';
import { type LiveOutput, runView } from './views/run.js';

// A page shows at most this much of an output (its end); `cronguard logs` has all of it.
const SHOWN_OUTPUT = 1024 * 1024;
// Read before that end, not shown: the colour it sets and an escape sequence or character
// it splits carry into what is shown (else a cut inside ESC[1;31m shows "31m", uncoloured).
const CONTEXT = 4096;
const REQUESTS_SHOWN = 20;

// The HTML pages and their forms.
export function pageRoutes(app: Hono, ctx: ServeContext): void {
  app.get('/', async (c) => {
    // A live page's refresh after a change event: what the watcher read for it, if it still has it.
    const shared = ctx.watcher.jobsFor(c.req.header('x-cronguard-refresh'));
    if (shared) c.header('server-timing', 'log;desc="as read for the change"');
    const jobs = shared ?? (await ctx.store.read(async (s) => withSlots(s, await s.jobStatus(null)), []));
    const fleet = await ctx.store.read((s) => s.fleetPause(), null);
    return c.html(page({ title: jobsTitle(jobs), events: '/events' }, html`${fleetBanner(fleet)}${jobsView(jobs, jobsQuery((n) => c.req.query(n)))}`));
  });

  app.get('/jobs/:name', async (c) => {
    const name = nameOf(c);
    if (name === null) return notFound(c, 'There is no such job.');
    const status = c.req.query('status') ?? '';
    const host = (c.req.query('host') ?? '').trim().slice(0, 255);
    const before = c.req.query('before');
    if (before !== undefined && idOf(before) === null) return badRequest(c, `'${before}' is not a run id.`);
    if (hasNul(host)) return badRequest(c, 'host: a host name has no NUL characters.');
    const query = { status: (RUN_STATUSES as readonly string[]).includes(status) ? (status as RunStatus) : null, host: host || null, before: idOf(before) };
    const found = await ctx.store.read(async (s) => {
      const [job] = await withSlots(s, await withLeases(s, await s.jobStatus(name)));
      if (!job) return null;
      const filter = { jobs: [name], status: query.status ?? undefined, host: query.host ?? undefined, beforeId: query.before ?? undefined, limit: RUNS_PER_PAGE + 1 };
      const requested = idOf(c.req.query('requested'));
      const requests = await s.listRequests(name, REQUESTS_SHOWN);
      // From the same read as the table where it is in it, so the notice and the table
      // never disagree (a run finishing between two statements).
      const request = requested === null ? null : (requests.find((q) => q.id === requested) ?? (await s.getRequest(requested)));
      const pauses = { fleet: await s.fleetPause(), events: await s.pauseEvents(name, PAUSE_EVENTS_SHOWN) };
      return { job, runs: await s.listRuns(filter), requests, requested: request?.job === name ? request : null, ...pauses };
    }, null);
    if (!found) return notFound(c, `No job ${name} in the run log.`);
    const view = { ...found, runs: found.runs.slice(0, RUNS_PER_PAGE), more: found.runs.length > RUNS_PER_PAGE, query, csrf: ctx.store.readOnly ? null : ctx.csrf.token(c) };
    return c.html(page({ title: name, events: `/events?job=${encodeURIComponent(name)}`, notice: notice(c) }, jobView(view)));
  });

  app.get('/runs/:id', async (c) => {
    const id = idOf(c.req.param('id'));
    if (id === null) return badRequest(c, `'${c.req.param('id')}' is not a run id.`);
    const run = await ctx.store.read((s) => s.runTail(id, SHOWN_OUTPUT + CONTEXT), null);
    if (!run) return notFound(c, `No run ${id} in the run log.`);
    const live = run.status === 'running' ? await liveOutput(run, ctx.store.stateDir) : null;
    const stored = run.output ?? '';
    let before = Math.max(0, stored.length - SHOWN_OUTPUT);
    // Never between the halves of a character outside the BMP (one character to SQL).
    if (/[\udc00-\udfff]/.test(stored.charAt(before))) before -= 1;
    const cut = run.output_cut || before > 0 ? `Showing the last ${SHOWN_OUTPUT / 1024} KiB; cronguard logs ${id} prints all of it.` : null;
    const events = run.status === 'running' ? `/runs/${id}/events${live?.kind === 'here' ? `?from=${live.bytes}` : ''}` : undefined;
    const stopping = c.req.query('stopping') !== undefined ? 'Asked to stop: its wrapper sends SIGTERM to its process group, then SIGKILL after the job\'s --kill-after.' : null;
    const csrf = ctx.store.readOnly ? null : ctx.csrf.token(c);
    return c.html(page({ title: `Run ${id}`, events, notice: stopping }, runView(run, live ? '' : ansiToHtml(stored, before), cut, live, csrf)));
  });

  app.post('/jobs/:name/run', (c) =>
    action(c, ctx, async (name, form) => {
      const args = typeof form.args === 'string' ? form.args.split(/\r?\n/).filter((a) => a !== '') : [];
      if (args.length > 1000 || args.some((a) => a.length > 10_000)) throw new BadInput('Arguments: at most 1,000, of at most 10,000 characters each.');
      const problem = argsProblem(args);
      if (problem !== null) throw new BadInput(`Arguments: ${problem}.`);
      const id = await ctx.store.write((s) => s.addRequest({ job: name, args, notBefore: new Date(), requestedBy: requester(c) }));
      return `requested=${id}`;
    }),
  );
  app.post('/jobs/:name/pause', (c) =>
    action(c, ctx, async (name, form) => {
      const reason = typeof form.reason === 'string' ? form.reason.trim().slice(0, 1000) : '';
      if (hasNul(reason)) throw new BadInput('Reason: a reason has no NUL characters.');
      const since = new Date().toISOString();
      await ctx.store.write((s) => s.setPaused(name, { reason: reason || null, since, by: requester(c), until: null }, requester(c), since));
      return 'paused=1';
    }),
  );
  app.post('/jobs/:name/resume', (c) =>
    action(c, ctx, async (name) => {
      await ctx.store.write((s) => s.setPaused(name, null, requester(c), new Date().toISOString()));
      return 'resumed=1';
    }),
  );
  // As `cronguard schedule`: checked the same way; an empty field clears it.
  app.post('/jobs/:name/schedule', (c) =>
    action(c, ctx, async (name, form) => {
      if (typeof form.schedule !== 'string') throw new BadInput('Schedule: the form has no schedule field (an empty one clears it).');
      const text = form.schedule;
      if (text.trim() === '') {
        await ctx.store.write((s) => s.setSchedule(name, null));
        return 'scheduled=0';
      }
      // A mistake, found here or by the store (PostgreSQL's set_schedule()), is the page's 400.
      const refused = (error: unknown) => {
        if (error instanceof UsageError) throw new BadInput(`Schedule: ${error.message.replace(/^schedule: /, '')}.`);
        throw error;
      };
      let spec: string;
      try {
        spec = parseSchedule(text).text;
      } catch (error) {
        return refused(error);
      }
      await ctx.store.write((s) => s.setSchedule(name, spec)).catch(refused);
      return 'scheduled=1';
    }),
  );
}


type Form = Record<string, string | File | (string | File)[]>;

// A form field a POST cannot take: the page says which and why (400), and nothing is written.
class BadInput extends Error {}

// A form's POST on a job that exists, then back to the job's page (post/redirect/get, so a
// reload never sends the form twice); `done` returns what the page is to say.
async function action(c: Context, ctx: ServeContext, done: (name: string, form: Form) => Promise<string>): Promise<Response> {
  const name = nameOf(c);
  const known = name !== null && (await ctx.store.read((s) => s.jobStatus(name), [])).length > 0;
  if (!known || name === null) return notFound(c, 'There is no such job.');
  try {
    return c.redirect(`/jobs/${encodeURIComponent(name)}?${await done(name, await c.req.parseBody())}`, 303);
  } catch (error) {
    if (error instanceof BadInput) return badRequest(c, error.message);
    throw error;
  }
}

function notice(c: Context): string | null {
  if (c.req.query('paused') !== undefined) return 'Paused: its invocations skip until it is resumed.';
  if (c.req.query('resumed') !== undefined) return 'Resumed.';
  if (c.req.query('scheduled') === '1') return 'Schedule saved.';
  if (c.req.query('scheduled') === '0') return 'Schedule cleared.';
  if (c.req.query('stopping') !== undefined) return 'Asked its running runs to stop: SIGTERM to each process group, then SIGKILL after the job\'s --kill-after.';
  return null;
}

// A running run's output so far, where this server can read it: the live copy of a run on
// this host, in this server's state directory (the job's own, when they share it).
async function liveOutput(run: RunRow, stateDir: string): Promise<LiveOutput> {
  if (run.host !== hostname()) return { kind: 'elsewhere' };
  if (!wrapperAlive(run)) {
    return { kind: 'none', why: `Its wrapper (pid ${run.pid}) is gone: the run was cut short, and the next run of the job records it as abandoned.` };
  }
  const name = liveName(run.run_key);
  if (name === null) return { kind: 'none', why: 'This run has no live output to show (its run key is not this version’s).' };
  const reader = new LiveReader(liveDir(stateDir), name);
  if (reader.uncaptured()) return { kind: 'none', why: 'This run does not capture its output (--capture 0).' };
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    await reader.pump(async (chunk) => {
      chunks.push(Buffer.from(chunk));
      bytes += chunk.length;
      return true;
    });
  } catch (error) {
    if (!(error instanceof CronguardError)) throw error;
    return { kind: 'none', why: `${error.message}; the output shows here when the run ends.` };
  } finally {
    reader.close();
  }
  // Its end as far as it is complete: a colour, character or sequence that the live copy
  // holds only the start of is for the event stream to finish (it reads the same bytes).
  const all = Buffer.concat(chunks);
  const ansi = new AnsiHtml();
  const cut = Math.max(0, bytes - SHOWN_OUTPUT);
  ansi.skip(all.subarray(0, cut));
  return { kind: 'here', html: ansi.push(all.subarray(cut)), bytes };
}
