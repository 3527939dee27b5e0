import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { cronguard } from '../helpers.js';
import { databaseUrl, pgSandbox, sql } from '../pg-helpers.js';

// `cronguard migrate --group ROLE` with the shared log: the web application's role may queue
// requests (request() and the plain INSERT), cancel one and follow them, and nothing more.
const created: string[] = [];
afterEach(async () => {
  for (const role of created.splice(0)) {
    await sql(`DROP OWNED BY ${role} CASCADE`).catch(() => {});
    await sql(`DROP ROLE IF EXISTS ${role}`);
  }
});

describe('migrate --group with PostgreSQL', () => {
  it('grants a web role what requests need, before any run', async () => {
    const box = pgSandbox();
    const web = `web_${randomBytes(4).toString('hex')}`;
    created.push(web);
    await sql(`CREATE ROLE ${web} LOGIN PASSWORD 'pw'`);
    const url = new URL(databaseUrl());
    url.username = web;
    url.password = 'pw';
    const asWeb = { ...box.env, CRONGUARD_DATABASE_URL: url.toString() };
    const job = box.job('report');
    const S = `"${box.schema}"`;

    const migrated = await cronguard(['migrate', '--group', web], box.env);
    expect(migrated).toMatchObject({ code: 0, stderr: '' });
    expect(migrated.stdout).toBe(`run log schema at version ${/\d+/.exec(migrated.stdout)?.[0]}\nrole ${web} may write requests and schedules and read the run log in schema ${box.schema}\n`);

    const { Client } = (await import('pg')).default;
    const client = new Client({ connectionString: url.toString() });
    await client.connect();
    try {
      const [viaFunction] = (await client.query(`SELECT ${S}.request($1, ARRAY['april']) AS id`, [job])).rows;
      const [viaInsert] = (await client.query(`INSERT INTO ${S}.requests (job, args) VALUES ($1, ARRAY['may']) RETURNING id`, [job])).rows;
      expect([Number(viaFunction.id), Number(viaInsert.id)]).toEqual([1, 2]);
      expect(await cronguard(['request', job, '--', 'june'], asWeb)).toMatchObject({ code: 0, stdout: '3\n', stderr: '' });
      expect(await cronguard(['request', '--cancel', '3'], asWeb)).toMatchObject({ code: 0, stderr: 'cronguard: request 3 cancelled\n' });
      await expect(client.query(`UPDATE ${S}.requests SET args = '{x}'`)).rejects.toThrow(/permission denied/);
      await expect(client.query(`DELETE FROM ${S}.runs`)).rejects.toThrow(/permission denied/);
      // A job's schedule, by the function or the plain statement; not its command or pause.
      expect((await client.query(`SELECT ${S}.set_schedule($1, 'every 2h') AS s`, [job])).rows).toEqual([{ s: 'every 2h' }]);
      await client.query(`INSERT INTO ${S}.jobs (name, schedule) VALUES ($1, '0 3 * * *') ON CONFLICT (name) DO UPDATE SET schedule = excluded.schedule`, [job]);
      expect(await cronguard(['schedule', job], asWeb)).toMatchObject({ code: 0, stdout: '0 3 * * *\n' });
      await expect(client.query(`UPDATE ${S}.jobs SET command = 'rm -rf /'`)).rejects.toThrow(/permission denied/);
      await expect(client.query(`UPDATE ${S}.jobs SET disabled = true`)).rejects.toThrow(/permission denied/);

      const served = await cronguard(['--on-request', '--batch', '-n', job, '--', 'sh', '-c', 'echo "$@"', 'sh'], box.env);
      expect(served).toMatchObject({ code: 0, stdout: 'april may\n', stderr: '' });
      const polled = await client.query(
        `SELECT r.status, r.exit_code, x.output FROM ${S}.requests r LEFT JOIN ${S}.runs x ON x.id = r.run_id WHERE r.id = $1`,
        [1],
      );
      expect(polled.rows).toEqual([{ status: 'succeeded', exit_code: 0, output: 'april may\n' }]);
    } finally {
      await client.end();
    }
  });

  it('refuses public: it is every role, not a web application\'s', async () => {
    const box = pgSandbox();
    const refused = await cronguard(['migrate', '--group', 'public'], box.env);
    expect(refused.code).toBe(64);
    expect(refused.stderr).toMatch(/^cronguard migrate: --group: public is every role[^\n]*\n$/);
    const granted = await sql(`SELECT 1 FROM information_schema.role_table_grants WHERE table_schema = $1 AND grantee = 'PUBLIC'`, [box.schema]);
    expect(granted).toEqual([]);
  });

  it('names a role that exists', async () => {
    const box = pgSandbox();
    expect(await cronguard(['migrate', '--group', 'no_such_role_here'], box.env)).toMatchObject({
      code: 64,
      stderr: "cronguard migrate: --group: no role 'no_such_role_here' in the database (see cronguard migrate --help)\n",
    });
  });
});
