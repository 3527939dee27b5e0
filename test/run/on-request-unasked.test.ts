import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cronguard, sandbox } from '../helpers.js';

// A run log that cannot be asked never stops a job: with a local lock the job runs and its
// record is spooled. But a run only for requests (--on-request) could see none: it runs
// nothing, rather than its command with no request.
describe('--on-request with a run log out of reach', () => {
  it.each([
    ['PostgreSQL', 'postgres://postgres@127.0.0.1:9/postgres'],
    ['MySQL', 'mysql://root@127.0.0.1:9/test'],
  ])('runs nothing (%s); a plain run of the same job runs and spools', async (_what, url) => {
    const box = sandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: url };
    const idle = await cronguard(['-l', 'flock', '-n', 'export', '--on-request', '--', 'touch', box.path('ran')], env);
    expect(idle.code).toBe(0);
    expect(idle.stdout).toBe('');
    expect(idle.stderr).toMatch(/^cronguard: run log \S+ \(\w+ \w+\) unavailable \(open: cannot reach [^\n]*\); records go to [^\n]*\n$/);
    expect(existsSync(box.path('ran'))).toBe(false);
    const plain = await cronguard(['-l', 'flock', '-n', 'export', '--', 'touch', box.path('ran')], env);
    expect(plain.code).toBe(0);
    expect(existsSync(box.path('ran'))).toBe(true);
  });
});
