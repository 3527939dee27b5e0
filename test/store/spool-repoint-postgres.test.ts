import { expect, it } from 'vitest';
import { cronguard, spooled } from '../helpers.js';
import { pgRuns, pgSandbox, proxy } from '../pg-helpers.js';

// A failover as operators live it: the primary is gone, runs meanwhile spool their records
// (no session, so no server identity to key them by: the URL's), and the URL is then pointed
// at the promoted standby, which has the same system identifier. What this host spooled
// while the old URL's server was out of reach belongs to that server, whose identity it had
// seen there before: the new URL's runs deliver it, rather than leaving it for a URL that
// no longer comes back. (The proxy is the old URL; the test server, reached directly, the
// promoted standby: the same system identifier.)
it('delivers records spooled while the old URL was out of reach once the URL names the same server elsewhere', async () => {
  const box = pgSandbox();
  const job = box.job('repointed');
  const old = await proxy();
  const before = { ...box.env, CRONGUARD_DATABASE_URL: old.url };
  try {
    expect(await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'seen'], before)).toMatchObject({ code: 0, stderr: '' });
    await old.stop();
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'during the outage'], before)).code).toBe(0);
    expect(spooled(box.stateDir)).toHaveLength(1);
  } finally {
    await old.close();
  }
  expect(await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'after'], box.env)).toMatchObject({ code: 0, stderr: '' });
  expect((await pgRuns(box.schema)).map((r) => r.output).sort()).toEqual(['after\n', 'during the outage\n', 'seen\n']);
  expect(spooled(box.stateDir)).toEqual([]);
});
