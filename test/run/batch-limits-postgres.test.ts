import { describe, expect, it } from 'vitest';
import { argumentRoom } from '../../src/run/supervisor/arg-limits.js';
import { cronguard, lines, sandbox } from '../helpers.js';
import { STORES, storeBox } from '../stores.js';

// A batch of requests larger than one command line (ARG_MAX, each argument at most 128 KiB)
// is served over as many runs as it takes, never with an exec that fails (E2BIG).
describe.each(STORES)('batches and the command line (%s)', (kind) => {
  it('runs a batch too big for one command line in several runs, each request once and in order; one that can never fit fails without running', async () => {
    const box = storeBox(kind);
    const job = box.job('big');
    await cronguard(['migrate'], box.env);
    const pad = 'x'.repeat(8000);
    const ids: number[] = [];
    for (let i = 0; i < 300; i++) ids.push(await box.request(job, [`${i}:${pad}`]));
    const tooLong = await box.request(job, ['y'.repeat(200_000)]);
    const log = box.path('log');
    // Each run notes how many arguments it got and the first and last of them.
    const record = ['sh', '-c', `echo "$# \${1%%:*} $(eval echo \\\${$#} | cut -d: -f1)" >> ${log}`, 'sh'];
    const first = await cronguard(['-n', job, '--on-request', '--batch', '--', ...record], box.env);
    expect(first.code).toBe(0);
    expect(first.stderr).toBe(`cronguard: ${job}: request ${tooLong} failed without running: its arguments cannot fit one command line (each at most 131071 bytes, all at most ${first.stderr.match(/all at most (\d+)/)?.[1]} here)\n`);
    for (let runs = 1; (await box.requests()).some((r) => r.status === 'pending'); runs++) {
      expect(runs).toBeLessThan(10);
      expect(await cronguard(['-n', job, '--on-request', '--batch', '--', ...record], box.env)).toMatchObject({ code: 0, stderr: '' });
    }
    const served = lines(log).map((l) => l.split(' ').map(Number));
    expect(served.length).toBeGreaterThan(1);
    // In order, none twice, none lost: each run takes up where the one before stopped.
    served.forEach(([n, from, to], i) => {
      expect(from).toBe(i === 0 ? 0 : (served[i - 1]?.[2] as number) + 1);
      expect((to as number) - (from as number) + 1).toBe(n);
    });
    expect(served.at(-1)?.[2]).toBe(299);
    const requests = await box.requests();
    expect(requests.filter((r) => r.id !== tooLong).every((r) => r.status === 'succeeded' && r.attempts === 1)).toBe(true);
    expect(requests.find((r) => r.id === tooLong)).toMatchObject({ status: 'failed', run_id: null, error: expect.stringMatching(/^its arguments cannot fit one command line/) });
  });

  it('a run started only for a request that can never fit does not start its command (64)', async () => {
    const box = storeBox(kind);
    const job = box.job('never');
    await cronguard(['migrate'], box.env);
    await box.request(job, ['z'.repeat(140_000)]);
    const result = await cronguard(['-n', job, '--on-request', '--', 'touch', box.path('ran')], box.env);
    expect(result.code).toBe(64);
    expect(result.stderr).toMatch(/failed without running: its arguments cannot fit one command line[^\n]*\ncronguard: \S+: no request it claimed can be served \(see the requests\); nothing ran \(run \d+; cronguard logs \d+\)\n$/);
    expect(lines(box.path('ran'))).toEqual([]);
    expect((await box.runs()).map((r) => r.status)).toEqual(['failed']);
  });
});

describe('cronguard request', () => {
  it('refuses arguments that no command line here could take (64), and records nothing', async () => {
    const box = sandbox();
    const env = { PATH: process.env.PATH, HOME: box.dir, CRONGUARD_STATE_DIR: box.stateDir, CRONGUARD_LOCK_DIR: box.lockDir, XDG_CONFIG_HOME: box.path('cfg') };
    const room = argumentRoom([], {});
    // Just over what the check allows, and still under what cronguard's own exec may take.
    const target = room + 4096;
    const args = Array.from({ length: Math.floor(target / 100_000) }, () => 'a'.repeat(100_000));
    args.push('a'.repeat(target - 100_000 * args.length));
    const result = await cronguard(['request', 'j', '--', ...args], env);
    expect(result).toMatchObject({ code: 64, stdout: '' });
    expect(result.stderr).toMatch(/^cronguard request: the arguments take \d+ bytes; a command line here takes at most \d+ in all \(see cronguard request --help\)\n$/);
    expect(await cronguard(['requests', '--json'], env)).toMatchObject({ stdout: '[]\n' });
  });
});
