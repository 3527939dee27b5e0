import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';
import { databaseUrl, pgSandbox, sql } from '../pg-helpers.js';
import { serve } from './serve-helpers.js';

const roles: string[] = [];
afterEach(async () => {
  for (const role of roles.splice(0)) {
    await sql(`DROP OWNED BY ${role} CASCADE`).catch(() => {});
    await sql(`DROP ROLE IF EXISTS ${role}`);
  }
});

// --read-only: no buttons, every POST refused, and nothing written, so that it runs on a
// role or a file that may only be read.
describe('serve --read-only', () => {
  it('hides the buttons and refuses every POST (403)', async () => {
    const box = sandbox();
    await cronguard(['-n', 'ro', '--', 'true'], box.env);
    const server = await serve(['--read-only'], box.env);
    const page = await (await server.get('/jobs/ro')).text();
    expect(page).toContain('<h1 class="name">ro</h1>');
    // No form that writes, no Run now or Pause button (the Pauses table is a record, not one).
    expect(page).not.toMatch(/<form method="post"|Run now|<button[^>]*>(Pause|Stop)/);
    expect((await server.post('/jobs/ro/run', {})).status).toBe(403);
    expect((await server.post('/jobs/ro/pause', {})).status).toBe(403);
    const api = await server.get('/api/jobs/ro/requests', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(api.status).toBe(403);
    expect(JSON.parse((await cronguard(['requests', '--json'], box.env)).stdout)).toEqual([]);
  });

  it('creates no run log where there is none, and may listen on any address', async () => {
    const box = sandbox();
    const server = await serve(['--read-only'], box.env);
    expect(await (await server.get('/')).text()).toContain('No jobs recorded yet');
    expect(await (await server.get('/api/jobs')).json()).toEqual([]);
    expect(existsSync(join(box.stateDir, 'cronguard.db'))).toBe(false);
    const open = await cronguard(['serve', '--read-only', '--listen', '0.0.0.0:99999'], box.env);
    expect(open.stderr).toMatch(/is not ADDRESS:PORT/);
  });

  it('serves pages with the read-only database role of docs/fleet-postgres.md', async () => {
    const box = pgSandbox();
    const job = box.job('dash');
    await cronguard(['-n', job, '--', 'echo', 'hi'], box.env);
    const role = `dash_${randomBytes(4).toString('hex')}`;
    roles.push(role);
    await sql(`CREATE ROLE ${role} LOGIN PASSWORD 'pw'; GRANT USAGE ON SCHEMA "${box.schema}" TO ${role};
               GRANT SELECT ON ALL TABLES IN SCHEMA "${box.schema}" TO ${role}`);
    const url = new URL(databaseUrl());
    url.username = role;
    url.password = 'pw';
    const server = await serve(['--read-only'], { ...box.env, CRONGUARD_DATABASE_URL: url.toString() });
    expect(await (await server.get('/')).text()).toContain(`data-job="${job}"`);
    const [run] = (await (await server.get(`/api/jobs/${job}/runs`)).json()) as { id: number }[];
    expect(await (await server.get(`/runs/${run?.id}`)).text()).toContain('hi\n</pre>');
    expect(server.stderr()).not.toMatch(/ 5\d\d /);
  });
});
