import { describe, expect, it } from 'vitest';
import { cronguard, isAlive, release, runs, sandbox, start, waitFor } from '../helpers.js';
import { eventStream, events, runsSoFar, serve } from './serve-helpers.js';

// Live updates: server-sent events for state changes and a running job's output.
describe('serve: live updates', () => {
  it("a running job's page shows its output so far, then the stream sends the rest and the end", async () => {
    const box = sandbox();
    const barrier = box.path('go');
    const script = `echo first; while [ ! -e '${barrier}' ]; do sleep 0.02; done; printf '\\033[32m<b>second</b>\\033[0m\\n'`;
    const job = start(['-n', 'live', '--', 'sh', '-c', script], box.env);
    await waitFor(() => runsSoFar(box.stateDir).some((r) => r.status === 'running' && r.child_pid !== null), 'the job to start');
    const server = await serve([], box.env);
    const id = (runs(box.stateDir)[0] as { id: number }).id;
    let page = '';
    await waitFor(async () => {
      page = await (await server.get(`/runs/${id}`)).text();
      return page.includes('first\n');
    }, 'the page to show the output so far');
    const from = /data-from="(\d+)"/.exec(page)?.[1];
    expect(from).toBe('6');
    expect(page).toContain(`data-events="/runs/${id}/events?from=6"`);
    const stream = await server.get(`/runs/${id}/events?from=${from}`);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    release(barrier);
    const seen = await events(stream, (e) => e.some((x) => x.event === 'end'));
    const output = seen.filter((e) => e.event === 'output').map((e) => e.data).join('');
    expect(output).toBe('<span class="fg2">&lt;b&gt;second&lt;/b&gt;</span>\n');
    expect(seen.at(-1)).toEqual({ event: 'end', data: String(id) });
    expect((await job.done).code).toBe(0);
    expect(await (await server.get(`/runs/${id}`)).text()).toContain('first\n<span class="fg2">&lt;b&gt;second&lt;/b&gt;</span>\n</pre>');
  });

  // The page shows what the live copy held when it loaded; the stream starts at that byte.
  // What came before it (a colour, half a character, half a sequence) carries on.
  it('output split where the page loaded keeps its colour, and a split character or sequence comes whole', async () => {
    const box = sandbox();
    const [one, two] = [box.path('one'), box.path('two')];
    const wait = (file: string) => `while [ ! -e '${file}' ]; do sleep 0.02; done`;
    // \342\202\254 is the euro sign; \033[1;32m bold green.
    const script = `printf '\\033[31mred \\342\\202'; ${wait(one)}; printf '\\254 still red\\033[0m\\n\\033[1;3'; ${wait(two)}; printf '2mgreen\\033[0m\\n'`;
    const job = start(['-n', 'split', '--', 'sh', '-c', script], box.env);
    await waitFor(() => runsSoFar(box.stateDir).some((r) => r.status === 'running' && r.child_pid !== null), 'the job to start');
    const server = await serve([], box.env);
    const id = (runs(box.stateDir)[0] as { id: number }).id;
    const loaded = async (shows: string) => {
      let page = '';
      await waitFor(async () => {
        page = await (await server.get(`/runs/${id}`)).text();
        return page.includes(shows);
      }, `the page to show ${shows}`);
      return { page, from: /data-from="(\d+)"/.exec(page)?.[1] };
    };
    const first = await loaded('<span class="fg1">red ');
    expect(first.page).toContain('<pre class="output" id="output" data-from="11"><span class="fg1">red </span></pre>');
    const stream = eventStream(await server.get(`/runs/${id}/events?from=${first.from}`));
    release(one);
    const second = await loaded('still red</span>');
    expect(second.page).toContain('<span class="fg1">red € still red</span>\n</pre>');
    const later = eventStream(await server.get(`/runs/${id}/events?from=${second.from}`));
    release(two);
    const output = async (s: ReturnType<typeof eventStream>) => {
      const seen = await s.until((e) => e.some((x) => x.event === 'end'));
      return seen.filter((e) => e.event === 'output').map((e) => e.data).join('');
    };
    expect(await output(stream)).toBe('<span class="fg1">€ still red</span>\n<span class="fg2 b">green</span>\n');
    expect(await output(later)).toBe('<span class="fg2 b">green</span>\n');
    expect((await job.done).code).toBe(0);
  });

  // Its row stays `running` until the job's next run marks it abandoned; the page must not
  // follow it for ever (as `logs -f` does not).
  it('a run whose wrapper was SIGKILLed is not followed: the page says so, its stream ends', async () => {
    const box = sandbox();
    const barrier = box.path('go');
    const job = start(['-n', 'orphan', '--', 'sh', '-c', `echo first; while [ ! -e '${barrier}' ]; do sleep 0.02; done`], box.env);
    await waitFor(() => runsSoFar(box.stateDir).some((r) => r.status === 'running' && r.child_pid !== null), 'the job to start');
    job.child.kill('SIGKILL');
    await job.done;
    const server = await serve([], box.env);
    const id = (runs(box.stateDir)[0] as { id: number }).id;
    expect(runs(box.stateDir)[0]).toMatchObject({ status: 'running' });
    const page = await (await server.get(`/runs/${id}`)).text();
    expect(page).toMatch(/Its wrapper \(pid \d+\) is gone/);
    expect(page).not.toContain('following live');
    expect(await events(await server.get(`/runs/${id}/events`), (e) => e.length > 0)).toEqual([{ event: 'end', data: String(id) }]);
    // Nothing waits for the orphaned command (its sandbox, and so its barrier, goes with the
    // test): its process group is ended here.
    const group = runs(box.stateDir)[0]?.child_pid as number;
    process.kill(-group, 'SIGKILL');
    await waitFor(() => !isAlive(group), 'the orphaned command to end');
  });

  it('a finished run ends its stream at once', async () => {
    const box = sandbox();
    await cronguard(['-n', 'done', '--', 'true'], box.env);
    const server = await serve([], box.env);
    expect(await events(await server.get('/runs/1/events'), (e) => e.length > 0)).toEqual([{ event: 'end', data: '1' }]);
  });

  it('the jobs stream says when a job changed: at once, then when it runs', async () => {
    const box = sandbox();
    await cronguard(['-n', 'watched', '--', 'true'], box.env);
    await cronguard(['-n', 'other', '--', 'true'], box.env);
    const server = await serve([], box.env);
    const stream = eventStream(await server.get('/events?job=watched'));
    expect(await stream.until((e) => e.length >= 1)).toEqual([{ event: 'change', data: 'watched' }]);
    await cronguard(['-n', 'other', '--', 'true'], box.env);
    await cronguard(['-n', 'watched', '--', 'false'], box.env);
    expect(await stream.until((e) => e.length >= 2)).toEqual([{ event: 'change', data: 'watched' }, { event: 'change', data: 'watched' }]);
    await stream.close();
    const all = eventStream(await server.get('/events'));
    expect(await all.until((e) => e.length >= 1)).toEqual([{ event: 'change', data: '*' }]);
    await cronguard(['-n', 'other', '--', 'true'], box.env);
    expect(await all.until((e) => e.length >= 2)).toEqual([{ event: 'change', data: '*' }, { event: 'change', data: '*' }]);
    await all.close();
    expect((await server.get('/events?job=%3Cx%3E')).status).toBe(404);
  });
});
