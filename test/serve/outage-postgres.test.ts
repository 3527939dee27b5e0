import { describe, expect, it } from 'vitest';
import { cronguard, waitFor } from '../helpers.js';
import { pgSandbox, proxy } from '../pg-helpers.js';
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
      const server = await serve([], { ...box.env, CRONGUARD_DATABASE_URL: db.url });
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
