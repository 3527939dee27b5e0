import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, start, waitFor } from '../helpers.js';
import { pgRuns, pgSandbox } from '../pg-helpers.js';

// A -l flock run of a job whose log is shared, its command started; `kill` ends its wrapper
// (the command, in a group of its own, goes on holding the flock).
async function flockRun(box: ReturnType<typeof pgSandbox>, job: string) {
  const log = box.path('hold');
  const run = start(['-l', 'flock', '-n', job, '--', fixture('hold.sh'), log, box.path('go')], box.env);
  await waitFor(async () => lines(log).length > 0 && (await pgRuns(box.schema))[0]?.child_pid != null, 'the flock run to start');
  const kill = async () => {
    run.child.kill('SIGKILL');
    await run.done;
  };
  return { kill, release: () => writeFileSync(box.path('go'), '') };
}

const statuses = async (schema: string) => (await pgRuns(schema)).map((r) => [r.lock_backend, r.status]);

describe("a postgres-lock run and this host's rows under another lock", () => {
  it('marks one abandoned once its wrapper is gone, and leaves one whose wrapper lives', async () => {
    const box = pgSandbox();
    const job = box.job('mixed');
    const flock = await flockRun(box, job);
    expect((await cronguard(['-l', 'postgres', '-n', job, '--', 'true'], box.env)).code).toBe(0);
    expect(await statuses(box.schema)).toEqual([
      ['flock', 'running'],
      ['postgres', 'succeeded'],
    ]);
    await flock.kill();
    expect((await cronguard(['-l', 'postgres', '-n', job, '--', 'true'], box.env)).code).toBe(0);
    flock.release();
    expect(await statuses(box.schema)).toEqual([
      ['flock', 'abandoned'],
      ['postgres', 'succeeded'],
      ['postgres', 'succeeded'],
    ]);
  });

  it('does so when it does not run either (--on-request, nothing requested)', async () => {
    const box = pgSandbox();
    const job = box.job('idle');
    const flock = await flockRun(box, job);
    await flock.kill();
    expect(await cronguard(['-l', 'postgres', '--on-request', '-n', job, '--', 'true'], box.env)).toMatchObject({ code: 0, stderr: '' });
    flock.release();
    expect(await statuses(box.schema)).toEqual([['flock', 'abandoned']]);
  });
});
