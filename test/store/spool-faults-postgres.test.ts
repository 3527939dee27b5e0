import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cronguard, spooled } from '../helpers.js';
import { pgRuns, pgSandbox, proxy } from '../pg-helpers.js';

const mounts: string[] = [];
afterAll(() => {
  for (const dir of mounts.splice(0)) {
    execFileSync('umount', [dir]);
    rmSync(dir, { recursive: true });
  }
});

// A state dir on a file system of 200 KiB that `fill` leaves almost full.
function smallDisk(): { stateDir: string; filler: string } {
  const dir = mkdtempSync(join(tmpdir(), 'cronguard-disk-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=200k,mode=0700', 'tmpfs', dir]);
  mounts.push(dir);
  return { stateDir: join(dir, 'state'), filler: join(dir, 'filler') };
}

// The directory of the spool a run of this sandbox wrote to.
const spoolDir = (stateDir: string) => join(stateDir, 'spool', readdirSync(join(stateDir, 'spool'))[0] as string);

describe('spool faults', () => {
  it('a full disk never leaves a truncated record; once there is room, the runs after it reach the database', async () => {
    if (process.geteuid?.() !== 0) return;
    const box = pgSandbox();
    const job = box.job('full');
    const disk = smallDisk();
    const server = await proxy();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: server.url, CRONGUARD_STATE_DIR: disk.stateDir };
    await server.stop();
    // Room for the start's record, not for the end's with 60 KB of output.
    writeFileSync(disk.filler, Buffer.alloc(200 * 1024 - 32 * 1024));
    const down = await cronguard(['-l', 'flock', '-n', job, '--', 'sh', '-c', 'head -c 61440 /dev/zero | tr "\\0" x'], env);
    expect(down.code).toBe(0);
    // The start's record went to the spool, as the first line says; the end's did not.
    expect(down.stderr).toMatch(/^cronguard: run log .* unavailable .*; records go to \S+ until it can be written\ncronguard: cannot write the spool in \S+ \(ENOSPC \(write\)\); this run goes unrecorded\n$/);
    for (const name of spooled(disk.stateDir)) JSON.parse(readFileSync(join(spoolDir(disk.stateDir), name), 'utf8'));
    rmSync(disk.filler);
    await server.start();
    const up = await cronguard(['-l', 'flock', '-n', job, '--', 'true'], env);
    await server.close();
    expect(up).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.error])).toEqual([
      ['abandoned', 'wrapper vanished before its run could be recorded'],
      ['succeeded', null],
    ]);
    expect(spooled(disk.stateDir)).toEqual([]);
  });

  it('a spool that cannot be written either: one line says so, and the job runs', async () => {
    const box = pgSandbox();
    mkdirSync(box.stateDir, { mode: 0o700 });
    writeFileSync(join(box.stateDir, 'spool'), 'not a directory');
    const env = { ...box.env, CRONGUARD_DATABASE_URL: 'postgres://postgres:pw@127.0.0.1:9/postgres' };
    const result = await cronguard(['-l', 'flock', '-n', box.job('nowhere'), '--', 'echo', 'ran'], env);
    expect(result).toMatchObject({ code: 0, stdout: 'ran\n' });
    expect(result.stderr).toMatch(
      /^cronguard: run log \S+ \(schema \w+\) unavailable \(open: .*ECONNREFUSED.*\); the spool in \S+ cannot be written either \(spool directory \S+ is not a directory\); this run goes unrecorded\n$/,
    );
  });

  it('an empty, a cut-short and a refused record are set aside with one line each; the others are delivered', async () => {
    const box = pgSandbox();
    const job = box.job('bad');
    const server = await proxy();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: server.url };
    await server.stop();
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'while down'], env)).code).toBe(0);
    const dir = spoolDir(box.stateDir);
    const [good] = readdirSync(dir);
    const text = readFileSync(join(dir, good as string), 'utf8');
    writeFileSync(join(dir, 'empty.json'), '');
    writeFileSync(join(dir, 'cut.json'), text.slice(0, text.length / 2));
    // A pid beyond PostgreSQL's integer: the database refuses it, every time.
    const refused = JSON.parse(text);
    writeFileSync(join(dir, 'refused.json'), JSON.stringify({ ...refused, run: { ...refused.run, runKey: 'refused', pid: 2 ** 40 } }));
    await server.start();
    const up = await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'back up'], env);
    await server.close();
    expect(up.code).toBe(0);
    const lines = up.stderr.split('\n').filter(Boolean).sort();
    expect(lines).toEqual([
      expect.stringMatching(/^cronguard: spooled run record \S+\/cut\.json cannot be delivered \(not a readable run record\); moved aside to \S+\/cut\.json\.bad-\d+-\d+$/),
      expect.stringMatching(/^cronguard: spooled run record \S+\/empty\.json cannot be delivered \(not a readable run record\); moved aside to /),
      expect.stringMatching(/^cronguard: spooled run record \S+\/refused\.json cannot be delivered \(refused: .*out of range.*\); moved aside to /),
    ]);
    expect((await pgRuns(box.schema)).map((r) => r.output)).toEqual(['while down\n', 'back up\n']);
    expect(readdirSync(dir).map((name) => name.replace(/\.bad-.*/, '.bad')).sort()).toEqual(['cut.json.bad', 'empty.json.bad', 'refused.json.bad']);
  });
});
