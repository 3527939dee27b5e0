import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { holdingClient, pgSandbox } from '../pg-helpers.js';

// Jobs sharing one advisory lock (--lock-key): a job that is not due says so without taking
// the lock (exit 0 while the key is held elsewhere); a due one takes it, finds it held (-E 3).
describe('jobs sharing a PostgreSQL lock (--lock-key)', () => {
  it('a job that is not due never takes the shared key', async () => {
    const box = pgSandbox();
    const key = String(BigInt.asIntN(64, BigInt(`0x${box.schema.slice(2)}`)));
    const report = box.job('report');
    const shared = ['--lock-key', key, '-E', '3'];
    expect(await cronguard([...shared, '-n', report, '--min-interval', '1h', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    const app = await holdingClient();
    try {
      await app.query('SELECT pg_advisory_lock($1::bigint)', [key]);
      expect(await cronguard([...shared, '-n', report, '--min-interval', '1h', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
      expect(await cronguard([...shared, '-n', box.job('asked'), '--on-request', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
      expect(await cronguard(['request', report], box.env)).toMatchObject({ code: 0 });
      expect(await cronguard([...shared, '-n', report, '--min-interval', '1h', '--', 'true'], box.env)).toMatchObject({ code: 3 });
    } finally {
      await app.end();
    }
    expect(await cronguard([...shared, '-n', report, '--min-interval', '1h', '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });

    // status names the job that runs under the shared key.
    const backup = box.job('backup');
    const holding = start([...shared, '-n', backup, '--', fixture('hold.sh'), box.path('b'), box.path('go')], box.env);
    await waitFor(() => lines(box.path('b')).length === 1, 'backup to hold the key');
    const jobs = JSON.parse((await cronguard(['status', '--json'], box.env)).stdout) as { job: string; lock_held_by: string | null }[];
    expect(jobs.find((j) => j.job === report)?.lock_held_by).toBe(backup);
    release(box.path('go'));
    expect(await holding.done).toMatchObject({ code: 0, stderr: '' });
  });
});
