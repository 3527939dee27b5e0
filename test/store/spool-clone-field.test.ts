import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, sandbox, spooled, start, waitFor } from '../helpers.js';
import { proxy } from '../pg-helpers.js';
import { dropPair, makePair, missingTools, PRIMARY, promoteStandby, query, STANDBY, urlOf } from '../standby-clusters.js';

// A physical copy of production (issue 35, item 6): a base backup (pg_basebackup) promoted on
// its own, as staging is made, has production's system identifier, database OID and schema.
// A host whose records for production wait in its spool and that also runs staging's jobs
// must not deliver them to the copy, which made nothing of them: they wait for production,
// and production gets them once it answers again. (A standby promoted after a failover
// still gets them: test/pg/standby-field.test.ts.)
const missing = missingTools();
const schema = `t_${randomBytes(6).toString('hex')}`;

const rows = (port: number, job: string) => query<{ run_key: string; status: string }>(port, `SELECT run_key, status FROM "${schema}".runs WHERE job = $1 ORDER BY id`, [job]);

describe.skipIf(missing !== null)(`a copy of production promoted on its own${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    await makePair();
    const b = sandbox();
    expect((await cronguard(['migrate'], { ...b.env, CRONGUARD_DATABASE_URL: urlOf(PRIMARY.port), CRONGUARD_SCHEMA: schema })).code).toBe(0);
    await waitFor(async () => (await query<{ n: number }>(STANDBY.port, 'SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1', [schema]))[0]?.n === 1, 'the schema to reach the copy');
    // Staging: the base backup, promoted on its own; production goes on.
    await promoteStandby();
  }, 300_000);
  afterAll(() => dropPair(), 120_000);

  it('records waiting for production are not delivered to the copy, and are delivered to production once it answers', async () => {
    const production = await proxy(urlOf(PRIMARY.port));
    try {
      const host = sandbox();
      const prod = { ...host.env, CRONGUARD_DATABASE_URL: production.url, CRONGUARD_SCHEMA: schema };
      const staging = { ...host.env, CRONGUARD_DATABASE_URL: urlOf(STANDBY.port), CRONGUARD_SCHEMA: schema };

      // A run recorded through production's URL: the last this host made there, so far.
      const other = `other-${schema}`;
      expect(await cronguard(['-n', other, '--', 'true'], prod)).toMatchObject({ code: 0, stderr: '' });
      // A run whose outcome is spooled under production's identity: production went away
      // mid-run.
      const job = `nightly-${schema}`;
      const log = host.path('log');
      const barrier = host.path('barrier');
      const held = start(['-n', job, '--on-lock-loss', 'continue', '--', fixture('hold.sh'), log, barrier], prod);
      await waitFor(() => lines(log).length === 1, 'the job to start');
      const [running] = await rows(PRIMARY.port, job);
      expect(running?.status).toBe('running');
      await production.stop();
      release(barrier);
      expect((await held.done).code).toBe(0);
      // And a whole run spooled under the URL, production out of reach from the start (flock).
      expect((await cronguard(['-l', 'flock', '-n', other, '--', 'true'], prod)).code).toBe(0);
      expect(spooled(host.stateDir)).toHaveLength(2);

      // Staging's job on this host reaches the copy: same identity, nothing of these runs.
      const ran = await cronguard(['-v', '-n', `staging-${schema}`, '--', 'true'], staging);
      expect(ran.code).toBe(0);
      expect(await rows(STANDBY.port, job)).toEqual([]);
      expect(await rows(STANDBY.port, other)).toEqual([]);
      expect(spooled(host.stateDir)).toHaveLength(2);
      expect(ran.stderr).toMatch(/spooled run record \S+ waits for its own server/);

      await production.start();
      expect(await cronguard(['-n', job, '--', 'true'], prod)).toMatchObject({ code: 0, stderr: '' });
      expect(spooled(host.stateDir)).toEqual([]);
      expect((await rows(PRIMARY.port, job)).map((r) => [r.run_key, r.status])).toEqual([
        [running?.run_key, 'succeeded'],
        [expect.any(String), 'succeeded'],
      ]);
      expect((await rows(PRIMARY.port, other)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
    } finally {
      await production.close();
    }
  });
});
