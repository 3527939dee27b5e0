import { describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';
import { serve } from './serve-helpers.js';

// A NUL byte, which PostgreSQL's text cannot store and no command line can carry, in any
// field a user gives: a 400 naming the field, while other people's pages load as usual on
// the same connection; nothing reaches the log or a run. Before, a NUL in ?host= was a 503
// that dropped the shared connection and failed the page loads under way with it.
describe.each(STORES)('serve: NUL in user input (%s)', (kind) => {
  it('is a 400 naming the field, never an outage, and never reaches a run', async () => {
    const box = storeBox(kind);
    const job = box.job('nul');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const server = await serve(['-q'], box.env);
    const json = { 'content-type': 'application/json', origin: server.url };
    const bad: [string, () => Promise<Response>][] = [
      ['host', () => server.get(`/jobs/${job}?host=a%00b`)],
      ['host', () => server.get(`/api/jobs/${job}/runs?host=a%00b`)],
      ['by', () => server.get(`/api/jobs/${job}/requests`, { method: 'POST', headers: json, body: JSON.stringify({ by: 'a\0b' }) })],
      ['args', () => server.get(`/api/jobs/${job}/requests`, { method: 'POST', headers: json, body: JSON.stringify({ args: ['a\0b'] }) })],
    ];
    const csrf = await server.csrf(`/jobs/${job}`);
    bad.push(['Arguments', () => server.post(`/jobs/${job}/run`, { csrf, args: 'ok\na\0b' }, { headers: { origin: server.url } })]);
    bad.push(['Reason', () => server.post(`/jobs/${job}/pause`, { csrf, reason: 'a\0b' }, { headers: { origin: server.url } })]);
    // Each bad request amid page loads of others, all under way at once.
    const good = () => server.get(`/jobs/${job}`);
    const answers = await Promise.all(bad.flatMap(([field, send]) => [good(), send().then(async (r) => ({ field, status: r.status, text: await r.text() })), good()]));
    for (const answer of answers) {
      if (answer instanceof Response) expect(answer.status).toBe(200);
      else {
        expect(answer.status, answer.field).toBe(400);
        expect(answer.text, answer.field).toContain(`${answer.field}: `);
      }
    }
    expect(await box.requests()).toEqual([]);
    expect(JSON.parse((await cronguard(['status', job, '--json'], box.env)).stdout)[0].state).toBe('idle');
    expect(server.stderr()).not.toMatch(/internal error/);
  });
});
