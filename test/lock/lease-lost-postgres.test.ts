import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, start } from '../helpers.js';
import { cuttingProxy } from '../pg-faults.js';
import { pgRuns, pgSandbox, sql } from '../pg-helpers.js';

// -l lease, an admission answered later than the lease may go unrenewed (0.6 of the ttl,
// 6 s at 10 s): a starved machine or a slow pooler. The holder, with nothing run yet, asks
// its database whether the lease is still its own. Untaken, the command runs; taken over or
// broken meanwhile, exit 75 (docs/exit-codes.md's exit codes: "or before the command could start
// (nothing ran)").
describe('-l lease, an admission answered late', () => {
  // The admission's reply held 6.5 s (more on a busy machine, which changes nothing); `meanwhile` runs then.
  async function late(job: string, env: NodeJS.ProcessEnv, ran: string, meanwhile: () => Promise<unknown>) {
    const slow = await cuttingProxy('true) AS a', 'delay-reply');
    const run = start(['-l', 'lease', '--lease-ttl', '10s', '-n', job, '--every-tick', '--', 'touch', ran], { ...env, CRONGUARD_DATABASE_URL: slow.url });
    await slow.reached;
    await new Promise((r) => setTimeout(r, 6500));
    await meanwhile();
    slow.pass();
    return run.done;
  }

  it('nobody took the lease meanwhile: the database says it is still this holder\'s, and the command runs', async () => {
    const box = pgSandbox();
    const job = box.job('late');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const ran = box.path('ran');
    const result = await late(job, box.env, ran, async () => {});
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(existsSync(ran)).toBe(true);
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.exit_code])).toEqual([['succeeded', 0]]);
    expect(await sql(`SELECT * FROM "${box.schema}".leases`)).toEqual([]);
  });

  it('a DBA broke the lease meanwhile: 75, one line, the run lock_lost with nothing run', async () => {
    const box = pgSandbox();
    const job = box.job('broken');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const ran = box.path('ran');
    const result = await late(job, box.env, ran, async () => {
      expect(await sql(`DELETE FROM "${box.schema}".leases WHERE job = $1 RETURNING job`, [job])).toHaveLength(1);
    });
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(
      new RegExp(
        `^cronguard: ${job}: lock lost before the command started \\(lease of -?\\d+ \\(epoch \\d+\\): taken over or broken \\(no longer this holder's\\)\\); nothing ran \\(run 1; cronguard logs 1\\)\\n$`,
      ),
    );
    expect(existsSync(ran)).toBe(false);
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.child_pid, r.exit_code, r.error])).toEqual([
      ['lock_lost', null, null, expect.stringMatching(/^lock lost before the command started .*; nothing ran$/)],
    ]);
  });
});
