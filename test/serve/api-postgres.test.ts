import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';
import { serve } from './serve-helpers.js';

// A JSON body, after checking it is one; its shape is what the test compares.
const json = async (response: Response): Promise<{ id: number } & Record<string, unknown>> => {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  return (await response.json()) as { id: number } & Record<string, unknown>;
};

// The JSON API answers what the CLI's --json prints, over both stores.
describe.each(STORES)('serve JSON API (%s)', (kind) => {
  it('jobs, runs, a run, a request and /metrics in the CLI shapes', async () => {
    const box = storeBox(kind);
    const job = box.job('api');
    await cronguard(['-n', job, '--', 'sh', '-c', 'echo "<out>"; exit 2'], box.env);
    await cronguard(['-n', job, '--', 'true'], box.env);
    const requestId = await box.request(job, ['a "b"']);
    const server = await serve(['-q'], box.env);
    const cli = async (args: string[]) => JSON.parse((await cronguard(args, box.env)).stdout);
    expect(await json(await server.get('/api/jobs'))).toEqual(await cli(['status', '--json']));
    // A list of runs is history's rows without their output (a run's own URL has it).
    const listed = async (args: string[]) => (await cli(['history', job, ...args, '--json'])).map(({ output: _, ...run }: Record<string, unknown>) => run);
    expect(await json(await server.get(`/api/jobs/${job}/runs`))).toEqual(await listed([]));
    expect(await json(await server.get(`/api/jobs/${job}/runs?status=failed&limit=5`))).toEqual(await listed(['--status', 'failed']));
    const [newest, oldest] = await cli(['history', job, '--json']);
    expect(await json(await server.get(`/api/jobs/${job}/runs?before=${newest.id}`))).toEqual([{ ...oldest, output: undefined }]);
    expect(await json(await server.get(`/api/runs/${oldest.id}`))).toEqual(oldest);
    expect(await json(await server.get(`/api/requests/${requestId}`))).toEqual((await cli(['requests', '--json']))[0]);
    const metrics = await server.get('/metrics');
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(await metrics.text()).toBe((await cronguard(['metrics'], box.env)).stdout);
    expect(server.stderr()).not.toMatch(/GET/);
  });

  it('POST /api/jobs/NAME/requests queues a request and answers its id', async () => {
    const box = storeBox(kind);
    const job = box.job('post');
    const server = await serve([], box.env);
    const post = (body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
      server.get(`/api/jobs/${job}/requests`, { method: 'POST', body, headers });
    const response = await post(JSON.stringify({ args: ['<x>', "it's"], by: 'deploy' }));
    expect(response.status).toBe(201);
    const { id } = await json(response);
    expect(await box.requests()).toMatchObject([{ id, job, args: ['<x>', "it's"], requested_by: 'deploy', status: 'pending' }]);
    expect(await json(await server.get(`/api/requests/${id}`))).toMatchObject({ id, status: 'pending' });
    expect((await post('{"args": "not a list"}')).status).toBe(400);
    expect((await post('[1]')).status).toBe(400);
    // Arguments no command line carries: refused here, not by the store (a 500).
    expect((await post('{"args": ["a\\u0000b"]}')).status).toBe(400);
    expect((await post('{"args": ["\\ud800"]}')).status).toBe(400);
    expect((await post('not json')).status).toBe(400);
    expect((await post('{}', { 'content-type': 'application/json', origin: 'http://evil.example' })).status).toBe(403);
    expect((await server.get('/api/jobs/1234/requests', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(400);
    expect(await box.requests()).toHaveLength(1);
  });
});
