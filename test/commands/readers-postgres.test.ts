import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { pgSandbox, sql } from '../pg-helpers.js';

describe('subcommands that read the shared log', () => {
  it('do not create a schema as a side effect of looking (a mistyped --schema)', async () => {
    const box = pgSandbox();
    for (const args of [['history'], ['logs', 'x'], ['locks']]) {
      const result = await cronguard(args, box.env);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(new RegExp(`^cronguard [a-z]+: no run log in schema ${box.schema} at \\S+ \\(nothing was recorded there\\)\\n$`));
    }
    expect(await sql('SELECT 1 FROM pg_namespace WHERE nspname = $1', [box.schema])).toEqual([]);
  });

  it('locks lists only the live holder of a key, not a vanished wrapper\'s stale row with the same --lock-key', async () => {
    const box = pgSandbox();
    const key = String(BigInt(`0x${box.schema.slice(2, 12)}`));
    const log = box.path('record');
    const barrier = box.path('go');
    const vanished = start(['-n', box.job('old'), '--lock-key', key, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length === 1, 'the first holder to start');
    vanished.child.kill('SIGKILL');
    await vanished.done;
    const live = start(['-n', box.job('new'), '--lock-key', key, '-w', '1m', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length >= 2, 'the second holder to start');
    const listed = JSON.parse((await cronguard(['locks', '--json'], box.env)).stdout);
    release(barrier);
    await live.done;
    expect(listed.map((l: { job: string }) => l.job)).toEqual([box.job('new')]);
  });

  it('locks shows a job name longer than application_name holds in full, from its run row', async () => {
    const box = pgSandbox();
    const job = box.job(`a-rather-long-job-name-${'x'.repeat(60)}`);
    const log = box.path('record');
    const barrier = box.path('go');
    const held = start(['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the job to start');
    const listed = JSON.parse((await cronguard(['locks', '--json'], box.env)).stdout);
    release(barrier);
    await held.done;
    expect(listed).toEqual([expect.objectContaining({ job, lock: 'postgres', verified: true })]);
  });
});
