import { afterEach, describe, expect, it } from 'vitest';
import { type Cast, newCast } from './users.js';

// A second attack pass on root's shared directories, after the first was mended: each of its
// findings, which must hold from now on.
const root = process.geteuid?.() === 0;
const DIR = '/run/lock/cronguard';

let c: Cast;
afterEach(() => c?.host.close());
const as = (user: Cast['alice'], script: string) => c.host.shAs(user, script);

// A rollback journal naming `target` as its super-journal: SQLite, finding it hot as it
// opens the log, plays it back and then deletes the super-journal it names.
const journal = (target: string) =>
  `/usr/bin/python3 -c 'import struct,sys; t=sys.argv[1].encode(); sys.stdout.buffer.write(b"X"*512+t+struct.pack(">II",len(t),sum(t))+bytes([0xd9,0xd5,0x05,0xf9,0x20,0xa1,0x63,0xd7]))' ${target}`;

describe.skipIf(!root)('attacks on the shared directories, second pass', () => {
  it('a member\'s rollback journal beside the run log never makes root delete a file; nor stops its runs', async () => {
    c = newCast(true);
    expect((await c.host.run(null, ['-n', 'job', '--', 'true'])).code).toBe(0);
    c.host.sh('echo secret > /var/lib/victim; chmod 600 /var/lib/victim');
    expect(as(c.alice, `${journal('/var/lib/victim')} > /var/lib/cronguard/cronguard.db-journal`)).toBe('exit 0\n');
    for (const args of [['status'], ['-n', 'job', '--', 'true']]) expect(await c.host.run(null, args)).toMatchObject({ code: 0, stderr: '' });
    expect(c.host.sh('cat /var/lib/victim')).toBe('secret\n');
    // Members still use the log.
    expect(await c.host.run(c.alice, ['-n', 'mine', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
  });

  it('-l lockfile: an epoch whose successor could not be named is no epoch; the stale lease is taken over', async () => {
    c = newCast(true);
    expect((await c.host.run(null, ['-l', 'lockfile', '-n', 'lf', '--', 'true'])).code).toBe(0);
    const n = '9'.repeat(249);
    expect(as(c.alice, `echo x > ${DIR}/lf.lockdir/epoch-${n} && touch -d 2000-01-01 ${DIR}/lf.lockdir/epoch-${n}`)).toBe('exit 0\n');
    expect(await c.host.run(null, ['-l', 'lockfile', '-n', 'lf', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
  });

  it('a stranger who made the lock directory and every name it could be moved to still does not stop root', async () => {
    c = newCast(true);
    as(c.mallory, `mkdir ${DIR}; T=$(date +%s%3N); i=0; while [ $i -lt 3000 ]; do : > ${DIR}.not-root-61003-$((T+i)); i=$((i+1)); done`);
    expect(await c.host.run(null, ['-n', 'job', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
    expect(c.statOf(DIR)).toBe('3770 root cronguard');
  });

  it('root changes no existing file in a lock directory it was given: another user\'s, or its own 0644', async () => {
    c = newCast(true);
    const app = `${c.host.dir}/app`;
    c.host.sh(`mkdir -m 2770 ${app} && chown cg-bob:cg-bob ${app}`);
    expect(as(c.bob, `umask 077; echo bobdata > ${app}/data.lock; mkdir ${app}/q.lockdir`)).toBe('exit 0\n');
    c.host.sh(`mkdir -m 755 ${c.host.dir}/run-app && echo 1234 > ${c.host.dir}/run-app/pidfile.lock && chmod 644 ${c.host.dir}/run-app/pidfile.lock`);
    expect((await c.host.run(null, ['--lock-dir', app, '-n', 'data', '--', 'true'])).code).toBe(0);
    expect((await c.host.run(null, ['-l', 'lockfile', '--lock-dir', app, '-n', 'q', '--', 'true'])).code).toBe(0);
    expect((await c.host.run(null, ['--lock-dir', `${c.host.dir}/run-app`, '-n', 'pidfile', '--', 'true'])).code).toBe(0);
    expect(c.host.sh(`stat -c '%a %U %G' ${app}/data.lock ${app}/q.lockdir ${c.host.dir}/run-app/pidfile.lock`)).toBe(
      '600 cg-bob cg-bob\n2700 cg-bob cg-bob\n644 root root\n',
    );
    expect(c.host.sh(`cat ${app}/data.lock ${c.host.dir}/run-app/pidfile.lock`)).toBe('bobdata\n1234\n');
  });

  it('a member whose login session predates joining the group is told so (77), never given a lock of its own', async () => {
    c = newCast(true);
    expect((await c.host.run(null, ['-n', 'prepare', '--', 'true'])).code).toBe(0);
    // As a terminal opened before `usermod -aG cronguard`: listed in /etc/group, not in the session.
    const result = c.host.sh(`setpriv --reuid=61001 --regid=61001 --clear-groups -- env HOME=${c.alice.home} ${process.execPath} ${process.cwd()}/dist/cronguard.cjs -n x -- true 2>&1; echo "exit $?"`);
    expect(result).toBe(
      `cronguard: lock directory ${DIR}: you are in group cronguard by /etc/group, but this login session is not yet; log in again, or run it through sg cronguard -c '...'\nexit 77\n`,
    );
  });

  it('a live output directory a member made first is moved aside, and root follows its own run live', async () => {
    c = newCast(true);
    expect((await c.host.run(null, ['-n', 'prepare', '--', 'true'])).code).toBe(0);
    expect(as(c.alice, 'mkdir /var/lib/cronguard/live')).toBe('exit 0\n');
    expect(await c.host.run(null, ['-n', 'talk', '--', 'echo', 'hello'])).toMatchObject({ code: 0, stdout: 'hello\n', stderr: '' });
    expect(c.statOf('/var/lib/cronguard/live')).toBe('2700 root cronguard');
    expect(c.host.sh('ls -d /var/lib/cronguard/live.not-root-61001-*')).toMatch(/live\.not-root-61001-/);
  });
});
