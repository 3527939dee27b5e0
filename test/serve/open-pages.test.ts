import { describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';
import { eventStream, serve } from './serve-helpers.js';

const PAGES = 10;

// Open jobs pages refresh themselves on every change: each such refresh is answered from the
// one read that found the change (its event's id), so ten open pages cost the log what one
// does. Before, every change made every open page read every job again, one after another
// through the server's one connection (2-2.8 s for a job page with 1,000 jobs, ten pages).
describe('serve: open pages share the read that found a change', () => {
  it("answers the pages' refreshes from the watcher's read, and ordinary loads afresh", async () => {
    const box = sandbox();
    await cronguard(['-n', 'steady', '--', 'true'], box.env);
    await cronguard(['-n', 'changing', '--', 'true'], box.env);
    const server = await serve(['-q'], box.env);
    const streams = await Promise.all(Array.from({ length: PAGES }, async () => eventStream(await server.get('/events'))));
    for (const stream of streams) await stream.until((e) => e.length >= 1);
    // One change, made at once (a run would be two: running, then its end).
    await cronguard(['disable', 'changing', '--reason', 'coalesced'], box.env);
    for (const stream of streams) await stream.until((e) => e.length >= 2);
    const refreshes = await Promise.all(streams.map((s) => server.get('/', { headers: { 'x-cronguard-refresh': s.lastId() as string } })));
    for (const page of refreshes) {
      expect(page.status).toBe(200);
      expect(page.headers.get('server-timing')).toContain('log;desc="as read for the change"');
      // The change itself is on the page.
      expect(await page.text()).toContain('<span class="reason">coalesced</span>');
    }
    // A page loaded (or refreshed after a reconnect) reads afresh.
    for (const header of [{}, { 'x-cronguard-refresh': 'fresh' }, { 'x-cronguard-refresh': '999999' }]) {
      expect((await server.get('/', { headers: header })).headers.get('server-timing')).not.toContain('log;');
    }
    await Promise.all(streams.map((s) => s.close()));
  });
});
