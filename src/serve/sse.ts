import { hostname } from 'node:os';
import type { Hono } from 'hono';
import { type SSEStreamingApi, streamSSE } from 'hono/streaming';
import { liveDir, liveName } from '../run/supervisor/live-file.js';
import { LiveReader, type LiveState } from '../run/supervisor/live-reader.js';
import type { RunRow } from '../store/types.js';
import { validateName } from '../util/name.js';
import { AnsiHtml } from './ansi.js';
import { idOf, type ServeContext, wrapperAlive } from './context.js';
import { EVERYTHING } from './watcher.js';

// An event stream sends a comment this often, so proxies keep it open.
const KEEPALIVE_MS = 15_000;
// How often a running run's live copy is read, and its row looked at.
const OUTPUT_POLL_MS = 250;
const ROW_CHECK_MS = 1000;

// Server-sent events: `change` when a job shown on the page changed (the page fetches
// itself again), `output` with a running job's output as HTML, `end` when that run ended.
export function sseRoutes(app: Hono, ctx: ServeContext): void {
  app.get('/events', (c) => {
    let job: string | null = null;
    const asked = c.req.query('job');
    if (asked !== undefined) {
      try {
        job = validateName(asked);
      } catch {
        return c.text('no such job', 404);
      }
    }
    return streamSSE(c, async (stream) => {
      // A change may have come between the page's render and this stream: one as soon as
      // the watcher has read the state it compares with.
      let pending = true;
      let wake = () => {};
      const { ready, unsubscribe } = ctx.watcher.subscribe((changes) => {
        if (job === null || changes.has(job) || changes.has(EVERYTHING)) {
          pending = true;
          wake();
        }
      });
      const stop = () => wake();
      stream.onAbort(stop);
      ctx.stopping.addEventListener('abort', stop);
      try {
        await ready;
        while (!stream.aborted && !ctx.stopping.aborted) {
          if (pending) {
            pending = false;
            // Its id: the watcher's read, from which the page's refresh may be answered.
            await stream.writeSSE({ event: 'change', data: job ?? EVERYTHING, id: String(ctx.watcher.current) });
          } else {
            await stream.write(': keep-alive\n\n');
          }
          // A change that came while the last write was under way is not waited for.
          if (pending) continue;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, KEEPALIVE_MS);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
      } finally {
        unsubscribe();
        ctx.stopping.removeEventListener('abort', stop);
      }
    });
  });

  // A running run's output from byte `from` on (what its page already shows is skipped),
  // as `logs -f` follows it: from the live copy on this host, until the run ends.
  app.get('/runs/:id/events', (c) => {
    const id = idOf(c.req.param('id'));
    const from = idOf(c.req.query('from')) ?? 0;
    if (id === null) return c.text('not a run id', 400);
    return streamSSE(c, async (stream) => {
      // The log unreachable: the stream ends, and the page, fetching itself, says why.
      const run = await ctx.store.read((s) => s.getRun(id), null).catch(() => null);
      if (run?.status === 'running' && wrapperAlive(run)) await follow(run, stream, from, ctx);
      if (!stream.aborted) await stream.writeSSE({ event: 'end', data: String(id) });
    });
  });
}

async function follow(run: RunRow, stream: SSEStreamingApi, from: number, ctx: ServeContext): Promise<void> {
  const name = run.host === hostname() ? liveName(run.run_key) : null;
  const reader = name === null ? null : new LiveReader(liveDir(ctx.store.stateDir), name);
  const ansi = new AnsiHtml();
  let skip = from;
  const write = async (chunk: Buffer): Promise<boolean> => {
    // What the page shows is read again, not sent: the colour it leaves set, and a
    // character or sequence split at `from`, carry on into what follows.
    const shown = Math.min(skip, chunk.length);
    skip -= shown;
    ansi.skip(chunk.subarray(0, shown));
    const text = shown < chunk.length ? ansi.push(chunk.subarray(shown)) : '';
    if (text !== '') await stream.writeSSE({ event: 'output', data: text });
    return !stream.aborted;
  };
  let checked = 0;
  try {
    while (!stream.aborted && !ctx.stopping.aborted) {
      // A copy that cannot be read (a link planted in its place) is left alone: the page
      // shows the stored output once the run ends.
      const state: LiveState = reader ? await reader.pump(write).catch(() => 'waiting' as const) : 'waiting';
      if (state === 'removed' || Date.now() - checked >= ROW_CHECK_MS) {
        checked = Date.now();
        const row = await ctx.store.read((s) => s.getRun(run.id), null).catch(() => null);
        if (state === 'removed' || (row !== null && (row.status !== 'running' || !wrapperAlive(row)))) break;
      }
      await stream.sleep(OUTPUT_POLL_MS);
    }
    const rest = ansi.end();
    if (rest !== '' && !stream.aborted) await stream.writeSSE({ event: 'output', data: rest });
  } finally {
    reader?.close();
  }
}
