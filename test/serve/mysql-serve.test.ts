import { describe, expect, it } from 'vitest';
import { mysqlBox } from '../commands/mysql-box.js';
import { cronguard, lines, start, waitFor } from '../helpers.js';
import { serve } from './serve-helpers.js';

// `cronguard serve` on a MySQL run log: the JSON API in the CLI's shapes, and the page's
// Run now (the form, with its CSRF token) served by a waiting --on-request loop.
const json = async (response: Response): Promise<unknown> => {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  return response.json();
};

describe('serve on a MySQL log', () => {
  it('/api/* answers what the CLI prints; /metrics what `cronguard metrics` does', async () => {
    const box = mysqlBox();
    const job = box.job('api');
    await cronguard(['-n', job, '--', 'sh', '-c', 'echo "<out>"; exit 2'], box.env);
    await cronguard(['-n', job, '--', 'true'], box.env);
    const requestId = await box.request(job, ['a "b"']);
    const server = await serve(['-q'], box.env);
    const cli = async (args: string[]) => JSON.parse((await cronguard(args, box.env)).stdout);
    expect(await json(await server.get('/api/jobs'))).toEqual(await cli(['status', '--json']));
    const [newest, oldest] = await cli(['history', job, '--json']);
    // A list of runs is history's rows without their output (a run's own URL has it).
    const withoutOutput = (r: Record<string, unknown>) => Object.fromEntries(Object.entries(r).filter(([k]) => k !== 'output'));
    expect(await json(await server.get(`/api/jobs/${job}/runs`))).toEqual([newest, oldest].map(withoutOutput));
    expect(await json(await server.get(`/api/runs/${oldest.id}`))).toEqual(oldest);
    expect(await json(await server.get(`/api/requests/${requestId}`))).toEqual((await cli(['requests', '--json']))[0]);
    expect(await (await server.get('/metrics')).text()).toBe((await cronguard(['metrics'], box.env)).stdout);
    // A POST to the API queues a request as the INSERT does.
    const posted = await server.get(`/api/jobs/${job}/requests`, { method: 'POST', body: JSON.stringify({ args: ["it's"], by: 'deploy' }), headers: { 'content-type': 'application/json' } });
    expect(posted.status).toBe(201);
    const { id } = (await json(posted)) as { id: number };
    expect(await box.request_(id)).toMatchObject({ status: 'pending', args: ["it's"] });
  });

  it('Run now (the form with its CSRF token) is served by the waiting loop, with its arguments; the page shows it', async () => {
    const box = mysqlBox();
    const job = box.job('export');
    const log = box.path('log');
    const command = ['sh', '-c', `printf '%s\\n' "$(printf '%s|' "$@")" >> ${log}`, 'sh'];
    await cronguard(['-n', job, '--', ...command], box.env);
    const loop = start(['-v', '-n', job, '--on-request', '--for', '5m', '--', ...command], box.env);
    let said = '';
    loop.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => said.includes('holding'), 'the loop to hold the lock');
    const server = await serve([], box.env);
    const csrf = await server.csrf(`/jobs/${job}`);
    const response = await server.post(`/jobs/${job}/run`, { csrf, args: '<x>\nsecond "arg"' }, { headers: { origin: server.url } });
    expect(response.status).toBe(303);
    const location = response.headers.get('location') as string;
    const id = Number(/\?requested=(\d+)$/.exec(location)?.[1]);
    await waitFor(async () => (await box.request_(id)).status === 'succeeded', 'the request to be served');
    loop.child.kill('SIGTERM');
    await loop.done;
    expect(lines(log)).toEqual(['|', '<x>|second "arg"|']);
    expect(await box.request_(id)).toMatchObject({ status: 'succeeded', run_id: 2, exit_code: 0, args: ['<x>', 'second "arg"'] });
    const page = await (await server.get(location)).text();
    expect(page).toContain(`Request ${id} <span class="status s-succeeded">succeeded</span> by <a href="/runs/2">run 2</a>.`);
    expect(page).toContain('<code class="arg">&lt;x&gt;</code> <code class="arg">second &quot;arg&quot;</code>');
    // Without the token, or from another origin: refused, nothing queued.
    expect((await server.post(`/jobs/${job}/run`, {})).status).toBe(403);
    expect((await server.post(`/jobs/${job}/run`, { csrf }, { headers: { origin: 'http://evil.example' } })).status).toBe(403);
    expect(await box.rows(`SELECT id FROM ${box.D}.requests`)).toHaveLength(1);
    expect(server.stderr()).not.toMatch(/error|PostgreSQL/i);
  });

  it('answers 503 while the MySQL database does not exist yet (creating none), and serves it once a run made it', async () => {
    const box = mysqlBox();
    const server = await serve(['-q'], box.env);
    const response = await server.get('/api/jobs');
    expect(response.status).toBe(503);
    expect(await response.text()).toMatch(new RegExp(`no run log in database ${box.database} at `));
    await cronguard(['-n', box.job('later'), '--', 'true'], box.env);
    expect((await server.get('/api/jobs')).status).toBe(200);
  });
});
