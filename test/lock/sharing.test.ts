import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, lines, release, waitFor } from '../helpers.js';
import { type Cast, newCast, type TestHost, type User } from './users.js';

// Who shares a local lock (docs/locks.md, "Who shares a lock"): root, the lock's owner and the
// members of the cronguard group; nobody else can hold a job's lock, and a stranger who
// still can (an old lock file) is reported, not taken for a quiet night.
const root = process.geteuid?.() === 0;
const LOCK = '/run/lock/cronguard/backup.lock';

let host: TestHost;
let alice: User; // in the group
let bob: User; // in the group
let mallory: User; // not
let marks: (name: string) => string;
let statOf: (path: string) => string;
let hold: Cast['hold'];
afterEach(() => host?.close());

function newHost(group: boolean): void {
  ({ host, alice, bob, mallory, marks, statOf, hold } = newCast(group));
}

describe.skipIf(!root)('who shares a local lock', () => {
  it('nobody outside can open root\'s default lock, lock directory or run log', async () => {
    newHost(false);
    expect(await host.run(null, ['-n', 'backup', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
    expect(statOf('/run/lock/cronguard')).toBe('700 root root');
    expect(statOf(LOCK)).toBe('600 root root');
    expect(statOf('/var/lib/cronguard')).toBe('700 root root');
    expect(statOf('/var/lib/cronguard/cronguard.db')).toBe('600 root root');
    expect(host.shAs(mallory, `flock -n -s ${LOCK} true`)).toMatch(/^flock: cannot open lock file \/run\/lock\/cronguard\/backup\.lock: Permission denied\nexit 66\n$/);
  });

  it('an old 0644 lock file is tightened on first use, and a stranger already holding it is reported and checked as WARNING', async () => {
    newHost(false);
    host.sh(`mkdir -m 755 /run/lock/cronguard && touch ${LOCK} && chmod 644 ${LOCK}`);
    const holder = await hold(mallory, LOCK);
    const skipped = await host.run(null, ['-q', '-n', 'backup', '--', 'sh', '-c', `echo ran >> ${marks('runs')}`]);
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toBe(
      `cronguard: backup did not run: its lock (flock ${LOCK}) is held by user cg-mallory (uid 61003), pid ${holder.pid}, who does not share this job; stop that process\n`,
    );
    expect(lines(marks('runs'))).toEqual([]);
    expect(statOf(LOCK)).toBe('600 root root');
    const check = await host.run(null, ['check', 'backup', '--max-age', '1h']);
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(/^WARNING - backup did not run .* ago: its lock was held by user cg-mallory \(uid 61003\), pid \d+, who does not share the job; has never succeeded\n$/);
    expect((await host.run(null, ['status', 'backup'])).stdout).toMatch(/blocked .*held by user cg-mallory/);

    host.stop(holder);
    await waitFor(() => host.sh(`flock -n ${LOCK} true && echo free || true`).trim() === 'free', 'the stranger to let go');
    expect(await host.run(null, ['-n', 'backup', '--', 'sh', '-c', `echo ran >> ${marks('runs')}`])).toMatchObject({ code: 0, stderr: '' });
    expect(lines(marks('runs'))).toEqual(['ran']);
    const ok = await host.run(null, ['check', 'backup', '--max-age', '1h']);
    expect(ok).toMatchObject({ code: 0 });
    expect(ok.stdout).toMatch(/^OK - backup succeeded/);
  });

  it('a stranger whose locking process is gone (a shell kept the descriptor) is found through the open file', async () => {
    newHost(false);
    host.sh(`mkdir -m 755 /run/lock/cronguard && touch ${LOCK} && chmod 644 ${LOCK}`);
    const holder = await hold(mallory, LOCK, 'fd');
    const skipped = await host.run(null, ['-n', 'backup', '--', 'true']);
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toBe(
      `cronguard: backup did not run: its lock (flock ${LOCK}) is held by user cg-mallory (uid 61003), pid ${holder.pid}, who does not share this job; stop that process\n`,
    );
  });

  it('another user\'s lock file that any user can open is reported in one line', async () => {
    newHost(false);
    const dir = join(host.dir, 'shared-locks');
    host.sh(`mkdir -m 777 ${dir} && touch ${dir}/j.lock && chown cg-mallory ${dir}/j.lock && chmod 644 ${dir}/j.lock`);
    const result = await host.run(alice, ['--no-log', '--lock-dir', dir, '-n', 'j', '--', 'true']);
    expect(result).toMatchObject({ code: 0 });
    expect(result.stderr).toBe(
      `cronguard: lock file ${dir}/j.lock belongs to user cg-mallory (uid 61003) and any user can open it (mode 644), so anyone could hold this job's lock and make it skip; its owner should chmod o-rw it\n`,
    );
  });

  it('with the group, root makes its directories root:cronguard 3770 and its lock files 0660, upgrading an old install on first use', async () => {
    newHost(true);
    host.sh(`mkdir -m 755 /run/lock/cronguard && touch ${LOCK} && chmod 644 ${LOCK} && mkdir -m 700 /var/lib/cronguard`);
    expect(await host.run(null, ['-n', 'backup', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
    expect(statOf('/run/lock/cronguard')).toBe('3770 root cronguard');
    expect(statOf(LOCK)).toBe('660 root cronguard');
    expect(statOf('/var/lib/cronguard')).toBe('3770 root cronguard');
    expect(statOf('/var/lib/cronguard/cronguard.db')).toBe('660 root cronguard');
    expect(host.shAs(mallory, `flock -n -s ${LOCK} true`)).toMatch(/^flock: cannot open lock file \/run\/lock\/cronguard\/backup\.lock: Permission denied\nexit 66\n$/);
  });

  it('two members running the same job at once: one runs, one skips, one history; root is excluded too', async () => {
    newHost(true);
    expect(await host.run(null, ['-n', 'prepare', '--', 'true'])).toMatchObject({ code: 0 });
    const first = host.start(alice, ['-n', 'shared', '--', fixture('hold.sh'), marks('shared'), marks('go')]);
    await waitFor(() => lines(marks('shared')).length === 1, 'alice\'s run to start');
    const second = await host.run(bob, ['-n', 'shared', '--', fixture('hold.sh'), marks('shared'), marks('go')]);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    const third = await host.run(null, ['-E', '3', '-n', 'shared', '--', fixture('hold.sh'), marks('shared'), marks('go')]);
    expect(third).toMatchObject({ code: 3, stderr: '' });
    release(marks('go'));
    expect(await first.done).toMatchObject({ code: 0, stderr: '' });
    expect(lines(marks('shared'))).toHaveLength(2);
    expect(await host.run(bob, ['-n', 'shared', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
    const history = JSON.parse((await host.run(null, ['history', 'shared', '--json'])).stdout) as { username: string; overlaps: number }[];
    expect(history.map((r) => r.username)).toEqual(['cg-bob', 'cg-alice']);
    expect(history[1]?.overlaps).toBe(2);
    expect(statOf('/run/lock/cronguard/shared.lock')).toBe('660 root cronguard');
  });

  it('a non-member keeps private directories: its job neither blocks nor waits for root\'s or a member\'s', async () => {
    newHost(true);
    expect(await host.run(null, ['-n', 'prepare', '--', 'true'])).toMatchObject({ code: 0 });
    const first = host.start(alice, ['-n', 'shared', '--', fixture('hold.sh'), marks('alice'), marks('go')]);
    await waitFor(() => lines(marks('alice')).length === 1, 'alice\'s run to start');
    const own = await host.run(mallory, ['-n', 'shared', '--', 'sh', '-c', `echo ran >> ${marks('mallory')}`]);
    expect(own).toMatchObject({ code: 0, stderr: '' });
    expect(lines(marks('mallory'))).toEqual(['ran']);
    expect(host.sh(`ls ${mallory.home}/.local/state/cronguard`)).toContain('cronguard.db');
    expect(host.sh(`ls ${mallory.home}/.cache/cronguard/locks`)).toBe('shared.lock\n');
    release(marks('go'));
    expect(await first.done).toMatchObject({ code: 0 });
    // And the other way round: the non-member's running job holds only its own lock.
    const own2 = host.start(mallory, ['-n', 'shared', '--', fixture('hold.sh'), marks('mallory2'), marks('go2')]);
    await waitFor(() => lines(marks('mallory2')).length === 1, 'mallory\'s run to start');
    expect(await host.run(null, ['-n', 'shared', '--', 'sh', '-c', `echo ran >> ${marks('root')}`])).toMatchObject({ code: 0, stderr: '' });
    expect(await host.run(bob, ['-n', 'shared', '--', 'sh', '-c', `echo ran >> ${marks('bob')}`])).toMatchObject({ code: 0, stderr: '' });
    expect([lines(marks('root')), lines(marks('bob'))]).toEqual([['ran'], ['ran']]);
    release(marks('go2'));
    expect(await own2.done).toMatchObject({ code: 0, stderr: '' });
  });

  it('the web application\'s user, in the group, queues a request into the shared run log; root\'s run serves it', async () => {
    newHost(true);
    const web = host.addUser('cg-web', 61004, true);
    host.addCronguardGroup();
    expect(await host.run(null, ['-n', 'prepare', '--', 'true'])).toMatchObject({ code: 0 });
    const asked = await host.run(web, ['request', 'report', '--by', 'shop', '--', 'april']);
    expect(asked).toMatchObject({ code: 0, stderr: '' });
    const served = await host.run(null, ['--on-request', '-n', 'report', '--', 'sh', '-c', `echo "$@" >> ${marks('report')}`, 'sh']);
    expect(served).toMatchObject({ code: 0, stderr: '' });
    expect(lines(marks('report'))).toEqual(['april']);
  });

  it('a member whose shared directory root has not made yet is told so (73), and nothing runs', async () => {
    newHost(true);
    const result = await host.run(alice, ['-n', 'x', '--', 'sh', '-c', `echo ran >> ${marks('x')}`]);
    expect(result.code).toBe(73);
    expect(result.stderr).toBe(
      'cronguard: lock directory /run/lock/cronguard does not exist yet; it is shared with group cronguard: root makes it so (install.sh, systemd-tmpfiles at boot, or any cronguard run as root), or give a directory of your own\n',
    );
    expect(lines(marks('x'))).toEqual([]);
  });

  it('root never follows a link a member left in the shared state directory', async () => {
    newHost(true);
    expect(await host.run(null, ['-n', 'prepare', '--', 'true'])).toMatchObject({ code: 0 });
    expect(await host.run(alice, ['-n', 'mine', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
    const victim = join(host.dir, 'victim');
    host.sh(`echo precious > ${victim} && chmod 644 ${victim}`);
    for (const name of ['cronguard.db-wal', 'cronguard.db-shm']) {
      const planted = host.spawn(alice, ['ln', '-sf', victim, `/var/lib/cronguard/${name}`]);
      expect(await new Promise((done) => planted.on('exit', done))).toBe(0);
      const result = await host.run(null, ['-n', 'after', '--', 'sh', '-c', `echo ran >> ${marks('after')}`]);
      expect(result.code).toBe(0);
      expect(result.stderr).toContain(`/var/lib/cronguard/${name} is a symbolic link`);
      expect(host.sh(`cat ${victim}; stat -c '%a %U %G' ${victim}`)).toBe('precious\n644 root root\n');
      host.sh(`rm /var/lib/cronguard/${name}`);
    }
    expect(lines(marks('after'))).toEqual(['ran', 'ran']);
  });
});
