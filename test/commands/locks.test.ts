import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, runs, sandbox, start, waitFor } from '../helpers.js';

describe('cronguard locks (flock)', () => {
  it('lists the lock files someone holds, with the run that holds them', async () => {
    const box = sandbox();
    const log = box.path('record');
    const barrier = box.path('barrier');
    const run = start(['-n', 'busy', '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0 && runs(box.stateDir).length > 0, 'the command to start');
    await cronguard(['-n', 'idle', '--', 'true'], box.env);
    const json = await cronguard(['locks', '--json'], box.env);
    const table = await cronguard(['locks'], box.env);
    release(barrier);
    expect((await run.done).code).toBe(0);
    expect(json.code).toBe(0);
    const held = JSON.parse(json.stdout);
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ job: 'busy', lock: 'flock', run_id: 1, pid: runs(box.stateDir)[0]?.pid });
    expect(table.stdout).toMatch(/^JOB\s+LOCK\s+HOST\s+PID\s+SINCE\s+RUN\nbusy\s+flock\s/);
  });

  it('says so when nothing is held', async () => {
    const box = sandbox();
    await cronguard(['-n', 'idle', '--', 'true'], box.env);
    expect(await cronguard(['locks'], box.env)).toMatchObject({ code: 0, stdout: '', stderr: 'cronguard: no locks held\n' });
    expect(JSON.parse((await cronguard(['locks', '--json'], box.env)).stdout)).toEqual([]);
  });

  it('rejects unknown options with 64', async () => {
    const result = await cronguard(['locks', '--all'], sandbox().env);
    expect(result.code).toBe(64);
    expect(result.stderr).toMatch(/unknown option '--all'/);
  });
});
