import { describe, expect, it } from 'vitest';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { cronguard, runs, sandbox } from '../helpers.js';

async function seed(env: NodeJS.ProcessEnv) {
  await cronguard(['-n', 'alpha', '--', 'true'], env);
  await cronguard(['-n', 'beta', '--', 'sh', '-c', 'exit 2'], env);
  await cronguard(['-n', 'alpha', '--', 'echo', 'second'], env);
}

describe('cronguard history', () => {
  it('prints a table of recent runs, newest first', async () => {
    const box = sandbox();
    await seed(box.env);
    const result = await cronguard(['history'], box.env);
    expect(result.code).toBe(0);
    const [header, ...rows] = result.stdout.trim().split('\n');
    expect(header).toMatch(/^ID\s+JOB\s+STATUS\s+TRIGGER\s+STARTED \(\S+\)\s+DURATION\s+EXIT\s+SKIPS\s+HOST\s+COMMAND$/);
    expect(rows.map((r) => r.split(/\s+/).slice(0, 3))).toEqual([
      ['3', 'alpha', 'succeeded'],
      ['2', 'beta', 'failed'],
      ['1', 'alpha', 'succeeded'],
    ]);
    expect(result.stdout).not.toMatch(/\x1b\[/);
  });

  it('filters by name, status and limit, and prints JSON rows with the contract columns', async () => {
    const box = sandbox();
    await seed(box.env);
    const json = await cronguard(['history', 'alpha', '--limit', '1', '--json'], box.env);
    expect(json.code).toBe(0);
    const parsed = JSON.parse(json.stdout);
    expect(parsed).toHaveLength(1);
    expect(parsed[0]).toMatchObject({ id: 3, job: 'alpha', status: 'succeeded', output: 'second\n', output_truncated: false });
    const failed = JSON.parse((await cronguard(['history', '--status', 'failed', '--json'], box.env)).stdout);
    expect(failed.map((r: { job: string }) => r.job)).toEqual(['beta']);
  });

  it('colours statuses when FORCE_COLOR is set and not when NO_COLOR is', async () => {
    const box = sandbox();
    await seed(box.env);
    const coloured = await cronguard(['history'], { ...box.env, FORCE_COLOR: '1' });
    expect(coloured.stdout).toMatch(/\x1b\[32msucceeded/);
    const plain = await cronguard(['history'], { ...box.env, NO_COLOR: '1' });
    expect(plain.stdout).not.toMatch(/\x1b\[/);
  });

  it('says so on stderr when nothing is recorded, without creating a database', async () => {
    const box = sandbox();
    const result = await cronguard(['history'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: '', stderr: 'cronguard: no runs recorded\n' });
    expect(runs(box.stateDir)).toEqual([]);
    const json = await cronguard(['history', '--json'], box.env);
    expect(JSON.parse(json.stdout)).toEqual([]);
  });

  it.each([
    [['history', '--limit', '0'], /--limit: '0' is not a whole number from 1 to 1000000/],
    [['history', '--limit', 'many'], /--limit: 'many'/],
    [['history', '--status', 'weird'], /unknown status 'weird'/],
    [['history', '--bogus'], /unknown option '--bogus'/],
    [['history', '../x'], /invalid job name/],
    [['history', 'a', '../b'], /invalid job name/],
  ])('rejects %j with exit 64', async (args, message) => {
    const result = await cronguard(args, sandbox().env);
    expect(result.code).toBe(64);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('shows its help with --help', async () => {
    const result = await cronguard(['history', '--help'], sandbox().env);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/Usage: cronguard history/);
  });
});

describe('cronguard migrate', () => {
  it('creates the schema and reports its version', async () => {
    const box = sandbox();
    const result = await cronguard(['migrate'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: `run log schema at version ${SQLITE_MIGRATIONS.length}\n` });
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
  });

  it('exits 69 when the run log cannot be opened', async () => {
    const box = sandbox();
    const result = await cronguard(['migrate', '--state-dir', '/proc/nope'], box.env);
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/cannot open the run log in \/proc\/nope/);
  });
});
