import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { advisoryKey } from '../../src/store/postgres/lock.js';
import { cronguard, fixture, lines, start, waitFor } from '../helpers.js';
import { pgSandbox, sql } from '../pg-helpers.js';

describe('locks are scoped like the run log', () => {
  it('keys a non-default schema into the hash, as the documented SQL computes it; the default stays as it was', async () => {
    const formula = `SELECT ('x' || left(encode(sha256(convert_to('cronguard:' || $1, 'UTF8')), 'hex'), 16))::bit(64)::bigint::text AS key`;
    const [scoped] = await sql<{ key: string }>(formula, ['staging:backup']);
    expect(advisoryKey('backup', 'staging').toString()).toBe(scoped?.key);
    const [plain] = await sql<{ key: string }>(formula, ['backup']);
    expect(advisoryKey('backup', 'cronguard').toString()).toBe(plain?.key);
    expect(advisoryKey('backup').toString()).toBe(plain?.key);
  });

  it('runs a job of one name in two schemas at once, and each schema lists only its own lock', async () => {
    const staging = pgSandbox();
    const production = pgSandbox();
    const name = `same-${staging.schema}`;
    const log = staging.path('record');
    const barrier = staging.path('go');
    const envs = [staging.env, { ...production.env, CRONGUARD_LOCK_DIR: staging.lockDir, CRONGUARD_STATE_DIR: staging.stateDir }];
    const runs = envs.map((env) => start(['-n', name, '--', fixture('hold.sh'), log, barrier], env));
    await waitFor(() => lines(log).length === 2, 'both schemas to run the job');
    const listed = await Promise.all(envs.map(async (env) => JSON.parse((await cronguard(['locks', '--json'], env)).stdout)));
    writeFileSync(barrier, '');
    for (const run of runs) expect((await run.done).code).toBe(0);
    expect(listed.map((held) => held.map((h: { key: string }) => h.key))).toEqual([
      [advisoryKey(name, staging.schema).toString()],
      [advisoryKey(name, production.schema).toString()],
    ]);
  });
});
