import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, sandbox, spooled, start, waitFor } from '../helpers.js';
import { haveMariadbd, privateMariadb } from '../mariadb-server.js';
import { mysqlQuery, mysqlSandbox, mysqlUrl } from '../mysql-helpers.js';

// The spool keys records by the server's identity once a session has asked it: MySQL's
// @@server_uuid (which a restored copy of its data directory shares), MariaDB's host name and
// server_id (which two MariaDBs of one host, both server_id 1 as shipped, share). A record
// of one server must not be delivered to another that shares its identity but never saw the
// run (issue 35, item 6, MySQL's side): it waits for its own, which gets it once it answers.
describe.skipIf(!haveMariadbd)('mysql: a record spooled for one server, and another of the same identity', () => {
  it('is not delivered to the other server, and is delivered to its own once it is back', async () => {
    const own = await privateMariadb();
    const other = mysqlSandbox();
    const database = other.database;
    const job = other.job('nightly');
    const host = sandbox();
    const at = (url: string) => ({ ...host.env, CRONGUARD_DATABASE_URL: url, CRONGUARD_SCHEMA: database });
    const [ownIdentity, otherIdentity] = await Promise.all(
      [own.url, mysqlUrl()].map(async (url) => (await mysqlQuery<{ id: string }>("SELECT CONCAT(@@hostname, ':', @@server_id) AS id", [], url))[0]?.id),
    );
    expect(ownIdentity).toBe(otherIdentity);

    // A record of a third URL waits: from now on each run asks its server's identity.
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'true'], at('mysql://root@127.0.0.1:1/mysql'))).code).toBe(0);
    // Its own server goes away mid-run: the outcome is spooled under the server's identity.
    const log = host.path('log');
    const barrier = host.path('barrier');
    const held = start(['-l', 'flock', '-n', job, '--', fixture('hold.sh'), log, barrier], at(own.url));
    await waitFor(() => lines(log).length === 1, 'the job to start');
    await own.shutdown();
    release(barrier);
    expect((await held.done).code).toBe(0);
    expect(spooled(host.stateDir)).toHaveLength(2);

    // The other server, of the same identity, runs the job; it gets nothing of the first.
    expect(await cronguard(['-l', 'flock', '-n', job, '--', 'true'], at(mysqlUrl()))).toMatchObject({ code: 0, stderr: '' });
    expect((await mysqlQuery<{ status: string }>(`SELECT status FROM \`${database}\`.runs WHERE job = ?`, [job])).map((r) => r.status)).toEqual(['succeeded']);
    expect(spooled(host.stateDir)).toHaveLength(2);

    await own.start();
    expect(await cronguard(['-l', 'flock', '-n', job, '--', 'true'], at(own.url))).toMatchObject({ code: 0, stderr: '' });
    expect(spooled(host.stateDir)).toHaveLength(1);
    const rows = await mysqlQuery<{ status: string }>(`SELECT status FROM \`${database}\`.runs WHERE job = ? ORDER BY id`, [job], own.url);
    expect(rows.map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });
});
