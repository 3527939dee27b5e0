import { describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';

describe('cronguard logs', () => {
  it('prints the captured output of a run by id, and of the latest run by name', async () => {
    const box = sandbox();
    await cronguard(['-n', 'j', '--', 'sh', '-c', 'echo one; echo two >&2'], box.env);
    await cronguard(['-n', 'j', '--', 'echo', 'latest'], box.env);
    expect(await cronguard(['logs', '1'], box.env)).toMatchObject({ code: 0, stdout: 'one\ntwo\n', stderr: '' });
    expect(await cronguard(['logs', 'j'], box.env)).toMatchObject({ code: 0, stdout: 'latest\n', stderr: '' });
  });

  it('notes truncation on stderr, keeping stdout the output itself', async () => {
    const box = sandbox();
    await cronguard(['--capture', '4', '-n', 't', '--', 'echo', 'abcdefgh'], box.env);
    const result = await cronguard(['logs', 't'], box.env);
    expect(result.stdout).toBe('fgh\n');
    expect(result.stderr).toMatch(/output truncated; this is its last 4 bytes/);
  });

  it.each([
    [['logs'], /missing required argument/],
    [['logs', '99'], /no run with id 99/],
    [['logs', 'nosuch'], /no runs recorded for job nosuch/],
    [['logs', '../../x'], /invalid job name/],
  ])('rejects %j with exit 64', async (args, message) => {
    const box = sandbox();
    await cronguard(['-n', 'j', '--', 'true'], box.env);
    const result = await cronguard(args, box.env);
    expect(result.code).toBe(64);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message);
  });
});

describe('cronguard migrate', () => {
  it('creates the schema and reports its version', async () => {
    const box = sandbox();
    const result = await cronguard(['migrate'], box.env);
    expect(result).toMatchObject({ code: 0, stdout: 'run log schema at version 1\n' });
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
  });

  it('exits 69 when the run log cannot be opened', async () => {
    const box = sandbox();
    const result = await cronguard(['migrate', '--state-dir', '/proc/nope'], box.env);
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/cannot open the run log in \/proc\/nope/);
  });
});
