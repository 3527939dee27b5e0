import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, sandbox, spooled } from '../helpers.js';
import { haveMariadbd, privateMariadb } from '../mariadb-server.js';
import { mysqlQuery } from '../mysql-helpers.js';

// A server that became read-only (a replica, read_only = ON) under a fleet's URL (issue 35,
// item 4, MySQL's side): the admission's write is refused (1290), and GET_LOCK taken alone
// there (after that, or with no run log) would let the job run beside the primary's run. The
// run is refused: 69, one line.
describe.skipIf(!haveMariadbd)('a MariaDB server gone read-only', () => {
  it('refuses the run (69, one line), never takes the lock alone', async () => {
    const server = await privateMariadb();
    await mysqlQuery('CREATE USER cron@127.0.0.1', [], server.url);
    await mysqlQuery('GRANT SELECT, INSERT, UPDATE, DELETE ON cg_field.* TO cron@127.0.0.1', [], server.url);
    const owner = { ...sandbox().env, CRONGUARD_DATABASE_URL: server.url, CRONGUARD_SCHEMA: 'cg_field' };
    expect((await cronguard(['migrate'], owner)).code).toBe(0);
    await mysqlQuery('SET GLOBAL read_only = ON', [], server.url);

    const box = sandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: `mysql://cron@127.0.0.1:${server.port}/cg_field`, CRONGUARD_SCHEMA: 'cg_field' };
    const refused = await cronguard(['-n', 'nightly', '--', 'touch', box.path('ran')], env);
    expect(refused).toMatchObject({ code: 69, stdout: '' });
    expect(refused.stderr).toMatch(
      /^cronguard: MySQL at cron@127\.0\.0\.1:\d+\/cg_field is read-only \(The MariaDB server is running with the --read-only option so it cannot execute this statement\): a replica; nothing ran\. Point the URL at the primary\n$/,
    );
    expect(existsSync(box.path('ran'))).toBe(false);
    expect(spooled(box.stateDir)).toEqual([]);

    // The lock taken alone, with no run log to refuse it.
    const alone = await cronguard(['--no-log', '-n', 'nightly', '--', 'touch', box.path('ran')], env);
    expect(alone).toMatchObject({ code: 69, stdout: '' });
    expect(alone.stderr).toMatch(/^cronguard: MySQL at cron@127\.0\.0\.1:\d+\/cg_field is read-only \(read_only is ON\): a replica; nothing ran\. Point the URL at the primary\n$/);
    expect(existsSync(box.path('ran'))).toBe(false);
  });
});
