import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, start } from '../helpers.js';
import { cuttingProxy } from '../pg-faults.js';
import { pgRuns, pgSandbox } from '../pg-helpers.js';

// -l lease: exit 75 also when the lease was gone before the command could start (README's
// exit codes: "or before the command could start (nothing ran)"). The holder counts its
// lease from the moment it sent the admission that took it; an answer that comes later than
// the lease may go unrenewed (0.6 of the ttl, 2.5 s at 5 s) leaves it nothing to run under.
describe('-l lease lost before the command starts', () => {
  it('an admission answered after 3 s of a 5 s lease: 75, one line, the run lock_lost with nothing run', async () => {
    const box = pgSandbox();
    const job = box.job('late');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const slow = await cuttingProxy('true) AS a', 'delay');
    const ran = box.path('ran');
    const run = start(['-l', 'lease', '--lease-ttl', '5s', '-n', job, '--every-tick', '--', 'touch', ran], { ...box.env, CRONGUARD_DATABASE_URL: slow.url });
    await slow.reached;
    // Held at least this long (more on a busy machine, which changes nothing).
    await new Promise((r) => setTimeout(r, 3000));
    slow.pass();
    const result = await run.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(
      new RegExp(
        `^cronguard: ${job}: lock lost before the command started \\(lease of -?\\d+ \\(epoch \\d+\\): not renewed for [\\d.]+s of its 5s\\); nothing ran \\(run 1; cronguard logs 1\\)\\n$`,
      ),
    );
    expect(existsSync(ran)).toBe(false);
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.child_pid, r.exit_code, r.error])).toEqual([
      ['lock_lost', null, null, expect.stringMatching(/^lock lost before the command started .*; nothing ran$/)],
    ]);
  });
});
