import { describe, expect, it } from 'vitest';
import { cronguard, waitFor } from '../helpers.js';
import { pgSandbox, proxy, sql } from '../pg-helpers.js';
import { serve } from './serve-helpers.js';

// A database that goes away while the server runs: the pages say so, the server stays up,
// and it reads again once the database is back.
describe('serve: the run log becomes unreachable', () => {
  it('answers 503 with a clear message while it is gone, and recovers', async () => {
    const box = pgSandbox();
    const job = box.job('outage');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const db = await proxy();
    try {
      const server = await serve(['--answer-within', '5s'], { ...box.env, CRONGUARD_DATABASE_URL: db.url });
      expect(await (await server.get('/')).text()).toContain(`data-job="${job}"`);
      await db.stop();
      const down = await server.get('/');
      expect(down.status).toBe(503);
      const page = await down.text();
      expect(page).toContain('The run log cannot be read right now');
      expect(page).not.toMatch(/\n\s+at /);
      const api = await server.get('/api/jobs');
      expect(api.status).toBe(503);
      expect(await api.json()).toMatchObject({ error: expect.stringMatching(/cannot be read/) });
      await db.start();
      await waitFor(async () => (await server.get('/')).status === 200, 'the server to read the log again');
      expect(await (await server.get('/')).text()).toContain(`data-job="${job}"`);
      expect(server.stderr()).not.toMatch(/internal error/);
    } finally {
      await db.close();
    }
  });
});

// Looking never creates a run log: a mistyped --schema is a page saying there is none (as
// `status` says), and the schema stays absent; Run now, a write, creates it as a run would.
describe('serve: a schema with no run log', () => {
  it('pages say so with 503 and nothing is created by looking; Run now creates it', async () => {
    const box = pgSandbox();
    const schemaCount = async () => Number((await sql<{ n: string }>('SELECT count(*) AS n FROM pg_namespace WHERE nspname = $1', [box.schema]))[0]?.n);
    const server = await serve([], box.env);
    for (const path of ['/', '/api/jobs', `/jobs/${box.job('x')}`]) {
      const answer = await server.get(path);
      expect(answer.status, path).toBe(503);
      expect(await answer.text(), path).toContain(`no run log in schema ${box.schema}`);
    }
    expect(await schemaCount()).toBe(0);
    const job = box.job('first');
    const created = await server.get(`/api/jobs/${job}/requests`, { method: 'POST', body: JSON.stringify({ args: [] }), headers: { 'content-type': 'application/json', origin: server.url } });
    expect(created.status).toBe(201);
    expect(await schemaCount()).toBe(1);
    expect((await server.get('/')).status).toBe(200);
    expect(server.stderr()).not.toMatch(/internal error/);
  });
});

// A database that stops answering (a cut network: nothing refused, nothing closed): pages
// answer 503 within the server's answer deadline instead of hanging 30 s and then failing as
// "internal error", the stuck connection is not kept, and pages read again once it answers.
describe('serve: the run log stops answering', () => {
  it('answers 503 while the network is cut, and reads again when it is back', async () => {
    const box = pgSandbox();
    const job = box.job('frozen');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const db = await proxy();
    try {
      const server = await serve(['--answer-within', '5s'], { ...box.env, CRONGUARD_DATABASE_URL: db.url });
      expect(await (await server.get('/')).text()).toContain(`data-job="${job}"`);
      db.freeze();
      // The first page waits out the deadline on the stuck connection, the next one on a new
      // connection that gets no answer: each is a 503 that says so, never a 500.
      for (const path of ['/', `/jobs/${job}`, '/api/jobs']) {
        const started = Date.now();
        const answer = await server.get(path);
        expect(answer.status, path).toBe(503);
        expect(await answer.text(), path).toMatch(/cannot be read right now: .*(did not answer|no answer) within 5 s/);
        // 5 s, generously measured (the deadline, not the 30 s statement timeout).
        expect(Date.now() - started, path).toBeLessThan(20_000);
      }
      db.thaw();
      await waitFor(async () => (await server.get('/')).status === 200, 'the server to read the log again');
      expect(await (await server.get(`/jobs/${job}`)).text()).toContain(job);
      expect(server.stderr()).not.toMatch(/internal error/);
    } finally {
      await db.close();
    }
  });
});
