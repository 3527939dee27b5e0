import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { collected, cronguard, fixture, lines, release, sandbox, spooled, start, waitFor } from '../helpers.js';
import { hasPgbouncer, type Pgbouncer, startPgbouncer } from '../pgbouncer.js';
import { clusterToolsMissing, makeCluster, type SmallCluster } from '../small-cluster.js';

// The sibling of postgres-restart-field.test.ts through a session-mode PgBouncer, as many
// fleets connect: the pooler stays up while its server restarts, and takes the waiter's
// statements into its queue, where nothing answers them. A waiter (-w) still ends when its
// wait is over (69, one line), not when the statement's own timeout or the pooler's retry
// runs out, and never reads the pooler's "cannot connect" as the lock held (a skip, 0).
let cluster: SmallCluster | null = null;
let pooler: Pgbouncer | null = null;

async function onCluster<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: (cluster as SmallCluster).url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

const bothConnected = (job: string) => async () =>
  (await onCluster<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [`cronguard:${job}`]))[0]?.n === 2;

const missing = clusterToolsMissing() ?? (hasPgbouncer ? null : 'PgBouncer is not installed');
describe.skipIf(missing !== null)(`a PostgreSQL server restarted behind PgBouncer while an invocation waits (-w)${missing ? `: skipped, ${missing}` : ''}`, () => {
  beforeAll(async () => {
    cluster = await makeCluster('cg_pool_restart', 20);
    // Its own timeouts for a server that does not answer are past any timeout of cronguard's,
    // so that only the waiter's own bound can end a statement held in its queue; a failed
    // login is tried again after a second, so that the next test's holder gets through.
    pooler = await startPgbouncer({ poolMode: 'session', poolSize: 10, target: cluster.url, settings: { server_connect_timeout: 600, query_wait_timeout: 600, server_login_retry: 1 } });
  }, 120_000);
  afterEach(() => {
    if (cluster && !cluster.running()) cluster.start();
  });
  afterAll(async () => {
    await pooler?.stop();
    cluster?.drop();
  });

  const setUp = (schema: string) => {
    const box = sandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: (pooler as Pgbouncer).url, CRONGUARD_SCHEMA: schema };
    return { box, env, log: box.path('record'), barrier: box.path('barrier'), ran: box.path('ran') };
  };
  const runs = (schema: string) => onCluster<{ status: string }>(`SELECT status FROM ${schema}.runs ORDER BY id`);

  it('a server still down when the wait is over: 69, one line, nothing run, no row but the holder’s', async () => {
    const c = cluster as SmallCluster;
    const { box, env, log, barrier, ran } = setUp('pool_down');
    const holder = start(['-n', 'pool-down', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-v', '-w', '4s', '-n', 'pool-down', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitFor(() => said.stderr().includes('is held; waiting up to 4s for it'), 'the waiter to wait');
    await waitFor(bothConnected('pool-down'), 'the waiter to connect');
    c.stop();
    const result = await waiter.done;
    expect((await holder.done).code).toBe(75);
    release(barrier);
    c.start();
    expect(result.code).toBe(69);
    const last = result.stderr.trimEnd().split('\n').at(-1) as string;
    expect(last).toMatch(/^cronguard: (cannot reach PostgreSQL|PostgreSQL) at postgres@127\.0\.0\.1:\d+\/test: /);
    expect(lines(ran)).toEqual([]);
    // The holder's record waits in the spool; anything of the waiter's there is delivered only
    // if its admission committed, which a queue in front of a stopped server never passed on.
    expect((await runs('pool_down')).map((r) => r.status)).toEqual(['running']);
    expect(spooled(box.stateDir).filter((f) => f.includes(`_${holder.child.pid}_`))).toHaveLength(1);
  }, 120_000);

  // A server that takes connections and never answers (its postmaster stopped) behind the
  // pooler: the waiter's backend ended meanwhile, the pooler closes its client, which logs in
  // again at once (the pooler answers a login itself) and sends its admission into a queue
  // that waits for a server connection. Before, the statement's own timeout (30 s) ended it:
  // `connection lost: Query read timeout`, long past the wait.
  it('a hung server: the statement in the queue ends with the wait, 69, one line, nothing run', async () => {
    const c = cluster as SmallCluster;
    const { box, env, log, barrier, ran } = setUp('pool_hung');
    const holder = start(['-n', 'pool-hung', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-v', '-w', '4s', '-n', 'pool-hung', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitFor(() => said.stderr().includes('is held; waiting up to 4s for it'), 'the waiter to wait');
    await waitFor(bothConnected('pool-hung'), 'the waiter to connect');
    const [{ pid: backend }] = (await onCluster<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE application_name = 'cronguard:pool-hung' AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)`,
    )) as [{ pid: number }];
    const postmaster = Number(readFileSync(`/var/lib/postgresql/15/${c.name}/postmaster.pid`, 'utf8').split('\n')[0]);
    process.kill(postmaster, 'SIGSTOP');
    let result: Awaited<typeof waiter.done>;
    try {
      process.kill(backend, 'SIGTERM');
      result = await waiter.done;
    } finally {
      process.kill(postmaster, 'SIGCONT');
    }
    release(barrier);
    expect((await holder.done).code).toBe(0);
    expect(result.code).toBe(69);
    expect(result.stderr.trimEnd().split('\n').at(-1)).toMatch(/^cronguard: PostgreSQL at postgres@127\.0\.0\.1:\d+\/test: connection lost: no answer before the wait was over$/);
    expect(lines(ran)).toEqual([]);
    // The admission lost in the queue left a record for a row the server never got: the next
    // run delivers the spool, which drops it, and records its own run only.
    expect(spooled(box.stateDir)).toHaveLength(1);
    expect(await cronguard(['-n', 'pool-hung', '--', 'true'], env)).toMatchObject({ code: 0, stderr: '' });
    expect(spooled(box.stateDir)).toHaveLength(0);
    expect((await runs('pool_hung')).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  }, 120_000);
});
