import { spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { asNobody, cronguard, sandbox } from '../helpers.js';

const NOBODY = 65534;
const fifo = (path: string) => new Promise((resolve) => spawn('mkfifo', [path]).on('exit', resolve));

// Another user's hostile files: a FIFO where a lock file or the run log should be must not
// hang cronguard in open(2), and nothing may be created through a link another user planted.
describe('files another user planted', () => {
  it.each([
    ['in the lock dir', () => ['-n', 'j'], (box: ReturnType<typeof sandbox>) => join(box.lockDir, 'j.lock')],
    ['as --lock-file', (box: ReturnType<typeof sandbox>) => ['--lock-file', box.path('f.lock')], (box: ReturnType<typeof sandbox>) => box.path('f.lock')],
  ])('a FIFO as the lock file %s: 73 at once, nothing run', async (_where, args, path) => {
    const box = sandbox();
    mkdirSync(box.lockDir);
    await fifo(path(box));
    const result = await cronguard([...args(box), '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 73, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard: lock file \S+ is not a regular file; remove it or choose another path\n$/);
    expect(existsSync(box.path('ran'))).toBe(false);
  });

  it.each([
    ['a FIFO', (path: string) => fifo(path)],
    ['a symlink to a fresh lease elsewhere', (path: string) => symlinkSync(`${path}.elsewhere`, path)],
  ])("%s as a lease's highest epoch holds nothing and hangs nothing", async (_, plant) => {
    const box = sandbox();
    const container = join(box.lockDir, 'j.lockdir');
    mkdirSync(container, { recursive: true });
    writeFileSync(join(box.lockDir, 'j.lockdir', 'epoch-5.elsewhere'), 'elsewhere 1\n');
    await plant(join(container, 'epoch-5'));
    expect(await cronguard(['locks', '--json'], box.env)).toMatchObject({ code: 0, stdout: '[]\n' });
    const result = await cronguard(['-l', 'lockfile', '-n', 'j', '--', 'touch', box.path('ran')], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(box.path('ran'))).toBe(true);
    expect(readdirSync(container).sort()).toEqual(['epoch-5.elsewhere', 'epoch-6']);
    expect(readFileSync(join(container, 'epoch-5.elsewhere'), 'utf8')).toBe('elsewhere 1\n');
  });

  it('a character device as --lock-file (/dev/null): 73', async () => {
    const result = await cronguard(['--lock-file', '/dev/null', '--', 'true'], sandbox().env);
    expect(result).toMatchObject({ code: 73, stderr: 'cronguard: lock file /dev/null is not a regular file; remove it or choose another path\n' });
  });

  it('a FIFO as the run log: the job runs unrecorded with one warning, no hang', async () => {
    const box = sandbox();
    mkdirSync(box.stateDir, { mode: 0o700 });
    await fifo(join(box.stateDir, 'cronguard.db'));
    const result = await cronguard(['-n', 'j', '--', 'echo', 'ran'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: 'ran\n' });
    expect(result.stderr).toMatch(/^cronguard: run log in \S+ unavailable \(open: run log \S+cronguard\.db is not a regular file; .*\); the job runs unrecorded\n$/);
  });

  it('a dangling symlink as the run log is not followed: its target is never created', async () => {
    const box = sandbox();
    mkdirSync(box.stateDir, { mode: 0o700 });
    symlinkSync(box.path('nologin'), join(box.stateDir, 'cronguard.db'));
    const result = await cronguard(['-n', 'j', '--', 'true'], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/run log .* unavailable .*symbolic link/);
    expect(existsSync(box.path('nologin'))).toBe(false);
  });

  it('root does not use a state dir another user owns (it could hold links to anywhere)', async () => {
    if (process.geteuid?.() !== 0) return;
    const box = sandbox();
    chmodSync(box.dir, 0o755);
    mkdirSync(box.stateDir, { mode: 0o700 });
    chownSync(box.stateDir, NOBODY, NOBODY);
    const result = await cronguard(['-n', 'j', '--', 'echo', 'ran'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: 'ran\n' });
    expect(result.stderr).toMatch(/state directory \S+ belongs to another user \(uid 65534\); refusing to use it\); the job runs unrecorded\n$/);
    expect(readdirSync(box.stateDir)).toEqual([]);
  });

  it('root does not use a state dir inside a directory another user can change', async () => {
    if (process.geteuid?.() !== 0) return;
    const box = sandbox();
    chmodSync(box.dir, 0o755);
    const home = box.path('home');
    mkdirSync(home);
    chownSync(home, NOBODY, NOBODY);
    const stateDir = join(home, 'state');
    const result = await cronguard(['--state-dir', stateDir, '-n', 'j', '--', 'true'], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/is inside \S+\/home, which another user can change \(uid 65534/);
    expect(existsSync(join(stateDir, 'cronguard.db'))).toBe(false);
  });

  it('a symlinked state dir is refused', async () => {
    const box = sandbox();
    mkdirSync(box.path('real'), { mode: 0o700 });
    symlinkSync(box.path('real'), box.stateDir);
    const result = await cronguard(['-n', 'j', '--', 'true'], box.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/state directory \S+ is a symbolic link/);
    expect(readdirSync(box.path('real'))).toEqual([]);
  });

  it('a lock dir swapped for a symlink while root starts: root never creates a lock file where the user pointed', async () => {
    if (process.geteuid?.() !== 0) return;
    const box = sandbox();
    const shared = sandbox();
    chmodSync(shared.dir, 0o777);
    const target = shared.path('target');
    mkdirSync(target, { mode: 0o777 });
    chmodSync(target, 0o777);
    const lockDir = shared.path('locks');
    mkdirSync(lockDir, { mode: 0o755 });
    chownSync(lockDir, NOBODY, NOBODY);
    const aside = shared.path('aside');
    // The user who owns the lock dir keeps swapping it for a link to `target` and back.
    const swapper = spawn(
      asNobody[0] as string,
      [...asNobody.slice(1), 'sh', '-c', `while :; do mv -T ${lockDir} ${aside}; ln -s ${target} ${lockDir}; rm -f ${lockDir}; mv -T ${aside} ${lockDir}; done`],
      { stdio: 'ignore', detached: true },
    );
    const stopped = new Promise((resolve) => swapper.once('exit', resolve));
    const codes: (number | null)[] = [];
    try {
      // With the run log on, opening it once sat between the lock dir's check and its use.
      for (let i = 0; i < 25; i++) {
        codes.push((await cronguard(['--lock-dir', lockDir, '-n', `j${i}`, '--', 'true'], box.env)).code);
      }
    } finally {
      // The loop and whichever mv or ln it was running.
      process.kill(-(swapper.pid as number), 'SIGKILL');
      await stopped;
    }
    expect(readdirSync(target)).toEqual([]);
    // Each invocation ran, or saw the link (73) or the gap (73): never anything else.
    expect(codes.filter((c) => c !== 0 && c !== 73)).toEqual([]);
    // How many ran depends on how the swaps fell; with the directory back in place, one runs.
    if (lstatSync(lockDir, { throwIfNoEntry: false })?.isSymbolicLink()) unlinkSync(lockDir);
    if (!existsSync(lockDir)) renameSync(aside, lockDir);
    expect((await cronguard(['--lock-dir', lockDir, '-n', 'after', '--', 'true'], box.env)).code).toBe(0);
  });
});
