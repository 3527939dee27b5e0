import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { cronguard, fixture, lines, release, sandbox, start, waitFor } from '../helpers.js';
import { haveMariadbd, privateMariadb } from '../mariadb-server.js';

// `cronguard locks` where performance_schema is on (MySQL 8's default). The shared MariaDB
// runs with it off, and it is set only at a server's start: this test starts one of its own
// with it on, and with the metadata-lock instrument MariaDB leaves off (MySQL 8: on).

describe.skipIf(!haveMariadbd)(`locks from performance_schema${haveMariadbd ? '' : ' (skipped: no /usr/sbin/mariadbd)'}`, () => {
  it('shows a --no-log run of a job the log never saw, from its connection\'s program name', async () => {
    const server = await privateMariadb(['--performance-schema=ON', '--performance-schema-instrument=wait/lock/metadata/sql/mdl=ON']);
    const database = `t_${randomBytes(6).toString('hex')}`;
    const box = sandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: server.url, CRONGUARD_SCHEMA: database };
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
    // Without performance_schema the unseen job's lock could not be named: only the log's
    // jobs' names are asked about (see held-locks.ts).
    expect(held.map((h) => [h.job, h.key, h.run_id, h.verified]).sort()).toEqual([
      [logged, mysqlLockName(database, logged), 1, true],
      [unseen, mysqlLockName(database, unseen), null, true],
    ]);
  });
});
