import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collected, cronguard, lines, start, waitFor } from '../helpers.js';
import { advisoryLocksOf, pgRuns, pgSandbox, sql } from '../pg-helpers.js';
import { hasPgbouncer, PGBOUNCER, type Pgbouncer, startPgbouncer } from '../pgbouncer.js';

// A `--on-request --for` loop under -l lease through a real PgBouncer in transaction
// pooling (issue 20): no LISTEN there, so the loop polls for requests once a second; each
// request it picks up runs under the lease the loop holds, with its epoch as the token.
let pooler: Pgbouncer | null = null;

const title = hasPgbouncer ? '-l lease: a --for loop behind PgBouncer (transaction pooling)' : `-l lease loop behind PgBouncer: skipped, ${PGBOUNCER} is missing`;
describe.skipIf(!hasPgbouncer)(title, () => {
  beforeAll(async () => {
    pooler = await startPgbouncer({ poolMode: 'transaction' });
  });
  afterAll(async () => {
    await pooler?.stop();
  });

  it('picks up requests by polling and runs each under its lease; no LISTEN, no advisory lock; nothing left behind', async () => {
    const box = pgSandbox();
    const job = box.job('loop');
    const env = { ...box.env, CRONGUARD_DATABASE_URL: (pooler as Pgbouncer).url };
    const log = box.path('log');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const command = ['--', 'sh', '-c', `echo "$CRONGUARD_FENCING_TOKEN $1" >> ${log}`, 'sh'];
    const loop = start(['-v', '-l', 'lease', '--lease-ttl', '6s', '-n', job, '--on-request', '--for', '1h', ...command], env);
    const said = collected(loop);
    await waitFor(async () => (await sql(`SELECT 1 FROM "${box.schema}".leases`)).length === 1, 'the loop to hold its lease');
    const served = (target: string) => waitFor(() => lines(log).some((l) => l.endsWith(` ${target}`)), `the request for ${target} to be served`);
    for (const target of ['first', 'second', 'third']) {
      expect(await cronguard(['request', job, '--', target], env)).toMatchObject({ code: 0 });
      await served(target);
    }
    // The loop holds one lease all along, renewed while it waits: each run had its epoch.
    const [lease] = await sql<{ epoch: string; pid: number }>(`SELECT epoch::text, pid FROM "${box.schema}".leases`);
    expect(lease?.pid).toBe(loop.child.pid);
    expect(lines(log).map((l) => l.split(' '))).toEqual([
      [lease?.epoch, 'first'],
      [lease?.epoch, 'second'],
      [lease?.epoch, 'third'],
    ]);
    expect(await sql(`SELECT 1 FROM pg_stat_activity WHERE query ILIKE 'LISTEN%' AND application_name = $1`, [`cronguard:${job}`.slice(0, 63)])).toEqual([]);
    expect(await advisoryLocksOf(job, box.schema)).toEqual([]);

    loop.child.kill('SIGTERM');
    const result = await loop.done;
    expect(result.code).toBe(143);
    expect(said.stderr()).not.toMatch(/renewal failed|lost/);
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => [r.trigger, r.status, r.lock_backend])).toEqual([
      ['request', 'succeeded', 'lease'],
      ['request', 'succeeded', 'lease'],
      ['request', 'succeeded', 'lease'],
    ]);
    const requests = await sql<{ status: string }>(`SELECT status FROM "${box.schema}".requests ORDER BY id`);
    expect(requests.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    // Let go on the way out: the next invocation need not wait for the ttl.
    expect(await sql(`SELECT 1 FROM "${box.schema}".leases`)).toEqual([]);
  });
});
