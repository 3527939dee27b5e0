import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { MYSQL_MIGRATIONS } from '../../src/store/mysql/migration-files.js';
import { cronguard } from '../helpers.js';
import { mysqlQuery, mysqlUrl } from '../mysql-helpers.js';
import { mysqlBox } from './mysql-box.js';

// `cronguard migrate --group ACCOUNT` on MySQL/MariaDB: the web application's user (or a role
// it has) may queue requests (docs/fleet-mysql.md's INSERT, or `cronguard request`), cancel one and
// follow them and their runs, and nothing more.
const created: string[] = [];
afterEach(async () => {
  for (const drop of created.splice(0)) await mysqlQuery(drop);
});

async function webUser(): Promise<{ name: string; env: (env: NodeJS.ProcessEnv) => NodeJS.ProcessEnv; url: URL }> {
  const name = `web_${randomBytes(4).toString('hex')}`;
  await mysqlQuery(`CREATE USER '${name}'@'%' IDENTIFIED BY 'pw'`);
  created.push(`DROP USER '${name}'@'%'`);
  const url = new URL(mysqlUrl());
  url.username = name;
  url.password = 'pw';
  // No database in the URL: the user may use the log's alone.
  url.pathname = '';
  return { name, url, env: (env) => ({ ...env, CRONGUARD_DATABASE_URL: url.toString() }) };
}

// A connection as the web application's account.
async function asWeb(url: URL) {
  const { createConnection } = await import('mysql2/promise');
  return createConnection({ host: url.hostname, port: Number(url.port || 3306), user: url.username, password: 'pw' });
}

describe('migrate --group with MySQL', () => {
  it('grants a web user what requests need, before any run', async () => {
    const box = mysqlBox();
    const web = await webUser();
    const job = box.job('report');
    const migrated = await cronguard(['migrate', '--group', web.name], box.env);
    expect(migrated).toMatchObject({ code: 0, stderr: '', stdout: `run log schema at version ${MYSQL_MIGRATIONS.length}\nuser or role ${web.name} may write requests and schedules and read the run log in database ${box.database}\n` });

    const client = await asWeb(web.url);
    try {
      await client.query(`INSERT INTO ${box.D}.requests (job, args, requested_by) VALUES (?, JSON_ARRAY('april'), 'php')`, [job]);
      expect(await cronguard(['request', job, '--', 'may'], web.env(box.env))).toMatchObject({ code: 0, stdout: '2\n', stderr: '' });
      expect(await cronguard(['request', job, '--', 'june'], web.env(box.env))).toMatchObject({ code: 0, stdout: '3\n' });
      expect(await cronguard(['request', '--cancel', '3'], web.env(box.env))).toMatchObject({ code: 0, stderr: 'cronguard: request 3 cancelled\n' });
      await expect(client.query(`UPDATE ${box.D}.requests SET args = JSON_ARRAY('x')`)).rejects.toThrow(/command denied/);
      await expect(client.query(`DELETE FROM ${box.D}.runs`)).rejects.toThrow(/command denied/);
      // A job's schedule, as docs/fleet-mysql.md's statement sets it; not its command or pause.
      await client.query(`INSERT IGNORE INTO ${box.D}.jobs (name) VALUES (?)`, [job]);
      await client.query(`UPDATE ${box.D}.jobs SET schedule = 'every 2h' WHERE name = ?`, [job]);
      expect(await cronguard(['schedule', job], web.env(box.env))).toMatchObject({ code: 0, stdout: 'every 2h\n' });
      await expect(client.query(`UPDATE ${box.D}.jobs SET command = 'rm -rf /'`)).rejects.toThrow(/command denied/);
      await expect(client.query(`UPDATE ${box.D}.jobs SET disabled = 1`)).rejects.toThrow(/command denied/);

      const served = await cronguard(['--on-request', '--batch', '-n', job, '--', 'sh', '-c', 'echo "$@"', 'sh'], box.env);
      expect(served).toMatchObject({ code: 0, stdout: 'april may\n', stderr: '' });
      const [polled] = await client.query(`SELECT q.status, q.exit_code, r.output FROM ${box.D}.requests q LEFT JOIN ${box.D}.runs r ON r.id = q.run_id WHERE q.id = 1`);
      expect(polled).toEqual([{ status: 'succeeded', exit_code: 0, output: 'april may\n' }]);
      expect(await cronguard(['history', '--json'], web.env(box.env))).toMatchObject({ code: 0, stderr: '' });
    } finally {
      await client.end();
    }
  });

  it('grants a role (MariaDB: no host) that the web user has by default', async () => {
    const box = mysqlBox();
    const web = await webUser();
    const role = `role_${randomBytes(4).toString('hex')}`;
    await mysqlQuery(`CREATE ROLE ${role}`);
    created.unshift(`DROP ROLE ${role}`);
    await mysqlQuery(`GRANT ${role} TO '${web.name}'@'%'`);
    await mysqlQuery(`SET DEFAULT ROLE ${role} FOR '${web.name}'@'%'`);
    expect(await cronguard(['migrate', '--group', role], box.env)).toMatchObject({ code: 0, stderr: '' });
    expect(await cronguard(['request', box.job('x')], web.env(box.env))).toMatchObject({ code: 0, stdout: '1\n', stderr: '' });
  });

  it('names an account that exists (64), and an account it cannot grant to without rights (77)', async () => {
    const box = mysqlBox();
    expect(await cronguard(['migrate', '--group', 'no_such_account_here'], box.env)).toMatchObject({
      code: 64,
      stderr: "cronguard migrate: --group: no user or role 'no_such_account_here' on the server; CREATE USER (or CREATE ROLE) it first (see cronguard migrate --help)\n",
    });
    const web = await webUser();
    const denied = await cronguard(['migrate', '--group', web.name], web.env(box.env));
    expect(denied.code).toBe(77);
    expect(denied.stderr).toMatch(/^cronguard migrate: [^\n]+\n$/);
  });
});
