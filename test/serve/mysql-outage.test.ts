import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { mysqlBox } from '../commands/mysql-box.js';
import { cronguard, waitFor } from '../helpers.js';
import { mysqlQuery, mysqlUrl } from '../mysql-helpers.js';
import { mysqlProxy } from '../mysql-proxy.js';
import { serve } from './serve-helpers.js';

// The web page on a MySQL log that stops answering, or answers with an error: 503 pages
// that name MySQL, never a 500 or "internal error", and reading again once it is back.

const users: string[] = [];
afterEach(async () => {
  for (const user of users.splice(0)) await mysqlQuery(`DROP USER '${user}'@'%'`);
});

describe('serve on a MySQL log that fails', () => {
  it('answers 503 naming MySQL while the network is silent, and reads again when it is back', async () => {
    const box = mysqlBox();
    const job = box.job('frozen');
    await cronguard(['-n', job, '--', 'true'], box.env);
    const db = await mysqlProxy();
    const server = await serve(['--answer-within', '5s'], { ...box.env, CRONGUARD_DATABASE_URL: db.url });
    expect(await (await server.get('/')).text()).toContain(`data-job="${job}"`);
    db.freeze();
    for (const path of ['/', `/jobs/${job}`, '/api/jobs']) {
      const answer = await server.get(path);
      expect(answer.status, path).toBe(503);
      expect(await answer.text(), path).toMatch(/cannot be read right now: .*MySQL.*(did not answer|no answer) within 5 s/);
    }
    db.thaw();
    await waitFor(async () => (await server.get('/')).status === 200, 'the server to read the log again');
    expect(server.stderr()).not.toMatch(/internal error|PostgreSQL/);
  });

  it('answers 503 with the server\'s own words for a missing privilege, not a 500', async () => {
    const box = mysqlBox();
    await cronguard(['-n', box.job('x'), '--', 'true'], box.env);
    const user = `web_${randomBytes(4).toString('hex')}`;
    users.push(user);
    await mysqlQuery(`CREATE USER '${user}'@'%' IDENTIFIED BY 'pw'`);
    // Enough to find the log, not to read the jobs.
    for (const table of ['schema_migrations', 'runs']) await mysqlQuery(`GRANT SELECT ON ${box.D}.${table} TO '${user}'@'%'`);
    const url = new URL(mysqlUrl());
    [url.username, url.password, url.pathname] = [user, 'pw', ''];
    const server = await serve([], { ...box.env, CRONGUARD_DATABASE_URL: url.toString() });
    const answer = await server.get('/api/jobs');
    expect(answer.status).toBe(503);
    expect(await answer.json()).toMatchObject({ error: expect.stringMatching(new RegExp(`MySQL at ${user}@[^:]+:\\d+: SELECT command denied .*jobs`)) });
    expect(server.stderr()).not.toMatch(/internal error/);
  });
});
