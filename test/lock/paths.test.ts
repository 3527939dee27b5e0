import { chmodSync, chownSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { asNobody, cronguard, runs, sandbox, start } from '../helpers.js';


function expectNothingRan(result: { code: number | null; stdout: string; stderr: string }, code: number, message: RegExp) {
  expect(result.code).toBe(code);
  expect(result.stdout).toBe('');
  expect(result.stderr).toMatch(message);
  expect(result.stderr.trim().split('\n')).toHaveLength(1);
  expect(result.stderr).not.toMatch(/\n\s+at /);
}

describe('lock paths that are refused', () => {
  it('a symlink in place of the lock file (73)', async () => {
    const box = sandbox();
    mkdirSync(box.lockDir);
    writeFileSync(box.path('target'), '');
    symlinkSync(box.path('target'), join(box.lockDir, 'j.lock'));
    const marker = box.path('ran');
    const result = await cronguard(['-n', 'j', '--', 'touch', marker], box.env);
    expectNothingRan(result, 73, /lock file .*j\.lock is a symbolic link; refusing to follow it/);
    expect(runs(box.stateDir)).toEqual([]);
  });

  it('a symlinked --lock-file (73)', async () => {
    const box = sandbox();
    symlinkSync('/etc/passwd', box.path('evil.lock'));
    const result = await cronguard(['--lock-file', box.path('evil.lock'), '--', 'true'], box.env);
    expectNothingRan(result, 73, /is a symbolic link/);
  });

  it('never changes an existing --lock-file, even one root owns that anyone can open (util-linux flock locks any file)', async () => {
    const box = sandbox();
    const file = box.path('shared.lock');
    writeFileSync(file, 'precious\n', { mode: 0o644 });
    chmodSync(file, 0o644);
    const result = await cronguard(['--no-log', '--lock-file', file, '--', 'true'], box.env);
    expect(result.code).toBe(0);
    expect(statSync(file).mode & 0o7777).toBe(0o644);
    expect(readFileSync(file, 'utf8')).toBe('precious\n');
  });

  it('a symlinked lock directory (73)', async () => {
    const box = sandbox();
    mkdirSync(box.path('elsewhere'));
    symlinkSync(box.path('elsewhere'), box.lockDir);
    const result = await cronguard(['-n', 'j', '--', 'true'], box.env);
    expectNothingRan(result, 73, /lock directory .* is a symbolic link \(to .*elsewhere\); give the real directory/);
  });

  it('a lock directory that is a file (73)', async () => {
    const box = sandbox();
    writeFileSync(box.lockDir, '');
    const result = await cronguard(['-n', 'j', '--', 'true'], box.env);
    expectNothingRan(result, 73, /lock directory .* is not a directory/);
  });

  it('a --lock-file whose directory does not exist (73)', async () => {
    const box = sandbox();
    const result = await cronguard(['--lock-file', box.path('missing/dir/x.lock'), '--', 'true'], box.env);
    expectNothingRan(result, 73, /cannot create lock file .*: its directory does not exist/);
  });

  it('a lock directory the user cannot write (77)', async () => {
    const box = sandbox();
    chmodSync(box.dir, 0o755);
    mkdirSync(box.lockDir, { mode: 0o555 });
    chmodSync(box.lockDir, 0o555);
    const result = await start(['--no-log', '-n', 'j', '--', 'true'], box.env, asNobody).done;
    expectNothingRan(result, 77, /permission denied on lock file .*j\.lock/);
  });

  // Another user's lock file j.lock with the given mode, run against as nobody.
  const runOnForeignLockFile = (mode: number) => {
    const box = sandbox();
    chmodSync(box.dir, 0o755);
    mkdirSync(box.lockDir, { mode: 0o755 });
    writeFileSync(join(box.lockDir, 'j.lock'), '', { mode });
    return start(['--no-log', '-n', 'j', '--', 'true'], box.env, asNobody).done;
  };

  // The same, in a setgid directory of a group nobody is made a member of.
  const runOnForeignLockFileInGroup = (mode: number) => {
    const box = sandbox();
    chmodSync(box.dir, 0o755);
    mkdirSync(box.lockDir);
    chownSync(box.lockDir, 0, 65534);
    chmodSync(box.lockDir, 0o2770);
    writeFileSync(join(box.lockDir, 'j.lock'), '', { mode });
    chownSync(join(box.lockDir, 'j.lock'), 0, 65534);
    return start(['--no-log', '-n', 'j', '--', 'true'], box.env, [...asNobody.slice(0, -2), '--groups=65534', '--']).done;
  };

  it('a lock file the user cannot read (77)', async () => {
    expectNothingRan(await runOnForeignLockFile(0o600), 77, /permission denied/);
  });

  it('shares a lock file that is only readable (flock needs no write access), saying that anyone could hold it', async () => {
    const result = await runOnForeignLockFile(0o644);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/^cronguard: lock file .*j\.lock belongs to user root \(uid 0\) and any user can open it \(mode 644\), so anyone could hold this job's lock and make it skip; its owner should chmod o-rw it\n$/);
  });

  it('shares a lock file through its group: 0640 in a setgid directory closed to others', async () => {
    expect(await runOnForeignLockFileInGroup(0o640)).toMatchObject({ code: 0, stderr: '' });
  });

  it('creates a private default lock directory 0700', async () => {
    const box = sandbox();
    chmodSync(box.dir, 0o777);
    const env = { ...box.env, CRONGUARD_LOCK_DIR: '', XDG_RUNTIME_DIR: box.path('xdg') };
    mkdirSync(box.path('xdg'), { mode: 0o777 });
    chmodSync(box.path('xdg'), 0o777);
    const result = await start(['--no-log', '-n', 'j', '--', 'true'], env, asNobody).done;
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(statSync(box.path('xdg/cronguard')).mode & 0o777).toBe(0o700);
  });
});
