import { afterEach, describe, expect, it } from 'vitest';
import { lines } from '../helpers.js';
import { type Cast, newCast } from './users.js';

// docs/requests.md, "From a web application" (SQLite): root's jobs, a web application running as
// another user whose group root lets write requests with `cronguard migrate --group G`. The
// web user is real to the kernel (TestHost), in group G and not in the cronguard group.
const root = process.geteuid?.() === 0;
const DB = '/var/lib/cronguard/cronguard.db';
const WWW = 61010;

let cast: Cast | null = null;
afterEach(() => cast?.host.close());

describe.skipIf(!root)('a web application as another user, through migrate --group', () => {
  it('writes requests by SQL and by cronguard request before any run; root serves them; others cannot', async () => {
    cast = newCast(true);
    const { host, mallory, marks, statOf } = cast;
    host.addGroupLine(`cg-www:x:${WWW}:cg-web`);
    const web = host.addUser('cg-web', 61004, false, [WWW]);
    // Before: the web user cannot reach root's log at all.
    expect(host.shAs(web, `sqlite3 ${DB} "SELECT 1"`)).toMatch(/exit [1-9]/);

    const migrated = await host.run(null, ['migrate', '--group', 'cg-www']);
    expect(migrated).toMatchObject({ code: 0, stderr: '' });
    expect(migrated.stdout).toMatch(/^run log schema at version \d+\ngroup cg-www may write requests and schedules and read the run log in \/var\/lib\/cronguard\n$/);
    expect(statOf('/var/lib/cronguard')).toBe('3770 root cg-www');
    expect(statOf(DB)).toBe('660 root cg-www');
    // SQLite removed -wal and -shm as root's connection closed: the web user's first write
    // makes them, which needs the directory.
    expect(host.sh('ls /var/lib/cronguard')).not.toContain('cronguard.db-wal');

    // The docs/requests.md's statements, as the web application runs them, before any run.
    const inserted = host.shAs(web, `sqlite3 -cmd ".timeout 10000" ${DB} "INSERT INTO requests (job, args) VALUES ('report', json_array('april')) RETURNING id;"`);
    expect(inserted).toBe('1\nexit 0\n');
    expect(await host.run(web, ['request', 'report', '--by', 'shop', '--', 'may'])).toMatchObject({ code: 0, stdout: '2\n', stderr: '' });
    const refused = await host.run(mallory, ['request', '--state-dir', '/var/lib/cronguard', 'report']);
    expect(refused.stderr).toBe('cronguard request: state directory /var/lib/cronguard is shared with group cg-www, which this user is not in\n');
    expect(refused.code).toBe(77);
    expect(host.shAs(mallory, `sqlite3 ${DB} "INSERT INTO requests (job) VALUES ('report')"`)).toMatch(/unable to open database|Permission denied|readonly/i);

    const served = await host.run(null, ['--on-request', '--batch', '-n', 'report', '--', 'sh', '-c', `echo "$@" >> ${marks('report')}`, 'sh']);
    expect(served).toMatchObject({ code: 0, stderr: '' });
    expect(lines(marks('report'))).toEqual(['april may']);
    // The page's poll, as the web user.
    expect(host.shAs(web, `sqlite3 ${DB} "SELECT r.status, r.exit_code FROM requests r WHERE r.id = 1"`)).toBe('succeeded|0\nexit 0\n');
    // Root's runs keep the directory as migrate left it.
    expect(statOf('/var/lib/cronguard')).toBe('3770 root cg-www');
    expect(statOf(DB)).toBe('660 root cg-www');
  });

  it('cronguard request creates the log when the directory is shared but holds none yet', async () => {
    cast = newCast(true);
    const { host, marks, statOf } = cast;
    host.addGroupLine(`cg-www:x:${WWW}:cg-web`);
    const web = host.addUser('cg-web', 61004, false, [WWW]);
    host.sh('install -d -o root -g cg-www -m 3770 /var/lib/cronguard');
    expect(await host.run(web, ['request', 'report', '--', 'april'])).toMatchObject({ code: 0, stdout: '1\n', stderr: '' });
    expect(statOf(DB)).toBe('660 cg-web cg-www');
    const served = await host.run(null, ['--on-request', '-n', 'report', '--', 'sh', '-c', `echo "$@" >> ${marks('report')}`, 'sh']);
    expect(served).toMatchObject({ code: 0, stderr: '' });
    expect(lines(marks('report'))).toEqual(['april']);
    // Root took the file over before SQLite opened it.
    expect(statOf(DB)).toBe('660 root cg-www');
  });

  it('is root\'s to give, to a group that exists', async () => {
    cast = newCast(true);
    const { host, alice } = cast;
    expect(await host.run(null, ['migrate', '--group', 'no-such-group'])).toMatchObject({
      code: 64,
      stderr: "cronguard migrate: --group: no group 'no-such-group' in /etc/group (see cronguard migrate --help)\n",
    });
    const own = await host.run(alice, ['migrate', '--state-dir', `${alice.home}/state`, '--group', 'cg-alice']);
    expect(own.code).toBe(77);
    expect(own.stderr).toMatch(/^cronguard migrate: --group: only root shares the embedded run log with a group/);
  });
});
