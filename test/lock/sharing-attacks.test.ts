import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, lines, release, waitFor } from '../helpers.js';
import { type Cast, newCast } from './users.js';

// What a hostile member of the cronguard group, or a stranger, tried against root's shared
// directories, each found by an attack pass: none of it may run a job twice, steer root to
// a file it should not touch, silence a skip, or blame the wrong user.
const root = process.geteuid?.() === 0;
const DIR = '/run/lock/cronguard';

let c: Cast;
afterEach(() => c?.host.close());

// `sh -c` as a user, its output and `exit N`.
const as = (user: Cast['alice'], script: string) => c.host.shAs(user, script);

describe.skipIf(!root)('attacks on the shared directories', () => {
  it('a lock file a member made first becomes root\'s on root\'s first run, and cannot be swapped while root holds it', async () => {
    c = newCast(true);
    c.host.sh(`mkdir -p ${DIR} && chown root:cronguard ${DIR} && chmod 3770 ${DIR}`);
    expect(as(c.alice, `umask 007; : > ${DIR}/backup.lock`)).toBe('exit 0\n');
    const first = c.host.start(null, ['-n', 'backup', '--', fixture('hold.sh'), c.marks('runs'), c.marks('go')]);
    await waitFor(() => lines(c.marks('runs')).length === 1, 'root\'s run to start');
    expect(c.statOf(`${DIR}/backup.lock`)).toBe('660 root cronguard');
    expect(as(c.alice, `mv ${DIR}/backup.lock ${DIR}/old && : > ${DIR}/backup.lock`)).toMatch(/Operation not permitted\nexit 1\n$/);
    expect(await c.host.run(null, ['-n', 'backup', '--', fixture('hold.sh'), c.marks('runs'), c.marks('go')])).toMatchObject({ code: 0, stderr: '' });
    release(c.marks('go'));
    expect(await first.done).toMatchObject({ code: 0, stderr: '' });
    expect(lines(c.marks('runs'))).toHaveLength(2);
  });

  it('a hard link in place of a lock file root would take over is refused (77), nothing runs', async () => {
    c = newCast(true);
    expect(await c.host.run(null, ['-n', 'prepare', '--', 'true'])).toMatchObject({ code: 0 });
    expect(as(c.alice, `: > ${DIR}/mine.lock && ln ${DIR}/mine.lock ${DIR}/backup.lock`)).toBe('exit 0\n');
    const result = await c.host.run(null, ['-n', 'backup', '--', 'sh', '-c', `echo ran >> ${c.marks('runs')}`]);
    expect(result).toMatchObject({ code: 77, stderr: `cronguard: lock file ${DIR}/backup.lock has another name elsewhere (2 links); remove it\n` });
    expect(lines(c.marks('runs'))).toEqual([]);
  });

  it('-l lockfile: root\'s epochs in a sticky 3770 container cannot be removed by a member', async () => {
    c = newCast(true);
    expect(as(c.alice, 'true')).toBe('exit 0\n');
    expect(await c.host.run(null, ['-n', 'prepare', '--', 'true'])).toMatchObject({ code: 0 });
    // A container a member made first, with a directory where an epoch would be.
    expect(as(c.alice, `mkdir -p ${DIR}/lf.lockdir/epoch-1`)).toBe('exit 0\n');
    const first = c.host.start(null, ['-l', 'lockfile', '-n', 'lf', '--', fixture('hold.sh'), c.marks('runs'), c.marks('go')]);
    await waitFor(() => lines(c.marks('runs')).length === 1, 'root\'s run to start');
    expect(c.statOf(`${DIR}/lf.lockdir`)).toBe('3770 root cronguard');
    expect(c.statOf(`${DIR}/lf.lockdir/epoch-2`)).toBe('660 root cronguard');
    expect(as(c.alice, `rm -f ${DIR}/lf.lockdir/epoch-2`)).toMatch(/Operation not permitted\nexit 1\n$/);
    expect(as(c.alice, `mv ${DIR}/lf.lockdir ${DIR}/gone`)).toMatch(/Operation not permitted\nexit 1\n$/);
    expect(await c.host.run(c.alice, ['-l', 'lockfile', '-n', 'lf', '--', 'sh', '-c', `echo alice >> ${c.marks('runs')}`])).toMatchObject({ code: 0, stderr: '' });
    release(c.marks('go'));
    expect(await first.done).toMatchObject({ code: 0, stderr: '' });
    expect(lines(c.marks('runs'))).toEqual([expect.stringMatching(/^start /), expect.stringMatching(/^end /)]);
  });

  it('a lease naming another user\'s pid, or another host, blames nobody', async () => {
    c = newCast(true);
    expect(await c.host.run(null, ['-n', 'prepare', '--', 'true'])).toMatchObject({ code: 0 });
    const sleeper = c.host.spawn(c.mallory, ['sleep', '1000']);
    for (const who of [`$(hostname) ${sleeper.pid}`, `other.example ${sleeper.pid}`]) {
      c.host.sh(`rm -rf ${DIR}/lf.lockdir`);
      expect(as(c.alice, `mkdir -m 3770 ${DIR}/lf.lockdir && echo "${who}" > ${DIR}/lf.lockdir/epoch-1`)).toBe('exit 0\n');
      expect(await c.host.run(null, ['-l', 'lockfile', '-n', 'lf', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
    }
    expect((await c.host.run(null, ['check', 'lf', '--max-age', '1h'])).stdout).not.toContain('mallory');
  });

  it('a stranger holding the lock through a setuid program is still the stranger', async () => {
    c = newCast(false);
    c.host.sh(`mkdir -m 755 ${DIR} && touch ${DIR}/old.lock && chmod 644 ${DIR}/old.lock`);
    // As su at its password prompt: real user mallory, effective user root.
    const ready = c.marks('ready');
    const holder = c.host.spawn(null, ['sh', '-c', `exec 9<${DIR}/old.lock && flock -n -s 9 && touch ${ready} && exec setpriv --ruid=61003 --rgid=61003 --clear-groups -- sleep 1000`]);
    await waitFor(() => existsSync(ready), 'the holder to take the lock');
    await waitFor(() => c.host.sh(`cat /proc/${holder.pid}/comm`).trim() === 'sleep', 'the holder to become mallory\'s');
    const skipped = await c.host.run(null, ['-n', 'old', '--', 'true']);
    expect(skipped.stderr).toBe(
      `cronguard: old did not run: its lock (flock ${DIR}/old.lock) is held by user cg-mallory (uid 61003), pid ${holder.pid}, who does not share this job; stop that process\n`,
    );
  });

  it('root moves aside a lock directory someone else made first, and runs', async () => {
    c = newCast(true);
    expect(as(c.mallory, `mkdir -m 777 ${DIR}`)).toBe('exit 0\n');
    expect(await c.host.run(null, ['-n', 'backup', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
    expect(c.statOf(DIR)).toBe('3770 root cronguard');
    expect(c.host.sh(`ls -d ${DIR}.not-root-61003-*`)).toMatch(/^\/run\/lock\/cronguard\.not-root-61003-\d+-[a-z0-9]+\n$/);
  });

  it('a member finds root\'s directories not yet shared (an install from before the group): 77, nothing runs, never a lock of its own', async () => {
    c = newCast(true);
    c.host.sh(`mkdir -m 700 ${DIR} /var/lib/cronguard`);
    const result = await c.host.run(c.alice, ['-n', 'x', '--', 'sh', '-c', `echo ran >> ${c.marks('x')}`]);
    expect(result).toMatchObject({
      code: 77,
      stderr: `cronguard: lock directory ${DIR} is not shared with group cronguard: root makes it so (install.sh, systemd-tmpfiles at boot, or any cronguard run as root), or give a directory of your own\n`,
    });
    expect(lines(c.marks('x'))).toEqual([]);
  });

  it('root never makes or renames anything through a spool a member planted: it moves it aside (-l flock with an unreachable database)', async () => {
    c = newCast(true);
    expect(await c.host.run(null, ['-n', 'prepare', '--', 'true'])).toMatchObject({ code: 0 });
    const target = `${c.host.dir}/root-only`;
    c.host.sh(`mkdir -m 700 ${target}`);
    expect(as(c.alice, `ln -s ${target} /var/lib/cronguard/spool`)).toBe('exit 0\n');
    const result = await c.host.run(null, ['-l', 'flock', '--db', 'postgres://u@127.0.0.1:1/x', '-n', 'pgjob', '--', 'sh', '-c', `echo ran >> ${c.marks('runs')}`]);
    expect(result.code).toBe(0);
    expect(result.stderr).not.toContain('spool directory');
    expect(lines(c.marks('runs'))).toEqual(['ran']);
    expect(c.host.sh(`ls -A ${target}`)).toBe('');
    expect(c.statOf('/var/lib/cronguard/spool')).toBe('2700 root cronguard');
    expect(c.host.sh('find /var/lib/cronguard/spool -name "*.json" | wc -l').trim()).toBe('1');
    expect(c.host.sh('ls -d /var/lib/cronguard/spool.not-root-61001-*')).toMatch(/spool\.not-root-61001-\d+-[a-z0-9]+\n$/);
  });
});
