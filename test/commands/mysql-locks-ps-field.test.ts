import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { cronguard, fixture, lines, release, sandbox, start, waitFor } from '../helpers.js';

// `cronguard locks` where performance_schema is on (MySQL 8's default). This machine's
// MariaDB runs with it off, and it can only be turned on at the server's start, so this
// test needs a server of its own: CRONGUARD_TEST_MYSQL_PS_URL (root's URL), e.g. a second
// mariadbd started with --performance-schema=ON. It skips without one.
const url = process.env.CRONGUARD_TEST_MYSQL_PS_URL;

async function query(sql: string): Promise<unknown[]> {
  const { createConnection } = await import('mysql2/promise');
  const u = new URL(url as string);
  const c = await createConnection({ host: u.hostname, port: Number(u.port || 3306), user: decodeURIComponent(u.username), password: decodeURIComponent(u.password) || undefined });
  try {
    return (await c.query(sql))[0] as unknown[];
  } finally {
    await c.end();
  }
}

const databases: string[] = [];
afterEach(async () => {
  for (const db of databases.splice(0)) await query(`DROP DATABASE IF EXISTS \`${db}\``);
});

describe.skipIf(!url)(`locks from performance_schema${url ? '' : ' (skipped: set CRONGUARD_TEST_MYSQL_PS_URL)'}`, () => {
  it('shows a --no-log run of a job the log never saw, from its connection\'s program name', async () => {
    // MariaDB records metadata locks only with this instrument on (MySQL 8: on by default).
    await query("UPDATE performance_schema.setup_instruments SET ENABLED = 'YES' WHERE NAME = 'wait/lock/metadata/sql/mdl'");
    const database = `t_${randomBytes(6).toString('hex')}`;
    databases.push(database);
    const box = sandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: url, CRONGUARD_SCHEMA: database };
    const [logged, unseen] = [`logged-${database}`, `unseen-${database}`];
    await cronguard(['migrate'], env);
    const log = box.path('log');
    const runs = [start(['-n', logged, '--', fixture('hold.sh'), log, box.path('go')], env), start(['-n', unseen, '--no-log', '--', fixture('hold.sh'), log, box.path('go')], env)];
    await waitFor(() => lines(log).length === 2, 'both runs to start');
    const listed = await cronguard(['locks', '--json'], env);
    release(box.path('go'));
    await Promise.all(runs.map((r) => r.done));
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    const held = JSON.parse(listed.stdout) as { job: string; key: string; run_id: number | null; verified: boolean }[];
    expect(held.map((h) => [h.job, h.key, h.run_id, h.verified]).sort()).toEqual([
      [logged, mysqlLockName(database, logged), 1, true],
      [unseen, mysqlLockName(database, unseen), null, true],
    ]);
  });
});
