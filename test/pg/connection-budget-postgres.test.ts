import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, start, waitFor } from '../helpers.js';
import { backendOf, databaseUrl, pgSandbox, sql } from '../pg-helpers.js';

// What a fleet costs in connections, and what cronguard says when a limit is reached.
describe('the connection budget', () => {
  const role = `cg_budget_${randomBytes(4).toString('hex')}`;
  const asRole = () => Object.assign(new URL(databaseUrl()), { username: role, password: 'secret' }).toString();
  beforeAll(async () => {
    await sql(`CREATE ROLE ${role} LOGIN PASSWORD 'secret' CONNECTION LIMIT 1`);
  });
  afterAll(async () => {
    await sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role]);
    await sql(`DROP ROLE ${role}`);
  });

  it("a role at its CONNECTION LIMIT: 69 and one line naming the role's limit", async () => {
    const box = pgSandbox();
    const holder = new pg.Client({ connectionString: asRole() });
    await holder.connect();
    try {
      const result = await cronguard(['-n', box.job('starved'), '--', 'true'], { ...box.env, CRONGUARD_DATABASE_URL: asRole() });
      expect(result.code).toBe(69);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toContain(`role ${role} is at its CONNECTION LIMIT`);
      expect(result.stderr).toContain(`ALTER ROLE ${role} CONNECTION LIMIT`);
    } finally {
      await holder.end();
    }
  });

  it('-v counts the heartbeats of a held job apart from its round trips', async () => {
    const box = pgSandbox();
    const job = box.job('beating');
    const log = box.path('hold');
    const barrier = box.path('go');
    const run = start(['-v', '-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the job to start');
    // The heartbeat's statement (the lock's probe, see store/postgres/lock.ts) is the last its
    // backend ran: at least one was sent.
    await waitFor(async () => {
      const pid = await backendOf(job);
      const [row] = await sql<{ query: string }>('SELECT query FROM pg_stat_activity WHERE pid = $1', [pid]);
      return row?.query.includes('pg_locks') === true;
    }, 'a heartbeat');
    writeFileSync(barrier, '');
    const result = await run.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(new RegExp(`${job}: \\d+ PostgreSQL round trips \\+ [1-9]\\d* heartbeats? after connecting`));
  });
});
