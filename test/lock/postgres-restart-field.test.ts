import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { collected, fixture, lines, release, sandbox, spooled, start, waitFor } from '../helpers.js';
import { clusterToolsMissing, makeCluster, type SmallCluster } from '../small-cluster.js';

// The PostgreSQL server restarts while an invocation waits (-w) for the lock another holds, as
// -l redis's waiter does (redis-break.test.ts): the waiter held nothing, so it connects again
// and waits for the server as for the lock; a server still down when the wait is over is 69.
// The holder lost its session and its lock with the restart: stopped, 75, recorded once. The
// shared test server must not be restarted: a cluster of this file's own.
let cluster: SmallCluster | null = null;

async function onCluster<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: (cluster as SmallCluster).url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

// Both invocations are connected: the holder, and the waiter, which (its schema stamp written
// by the holder) sends nothing but its admissions from then on.
const bothConnected = (job: string) => async () =>
  (await onCluster<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [`cronguard:${job}`]))[0]?.n === 2;

const missing = clusterToolsMissing();
describe.skipIf(missing !== null)(`a PostgreSQL server restarted while an invocation waits (-w)${missing ? `: skipped, ${missing}` : ''}`, () => {
  beforeAll(async () => {
    cluster = await makeCluster('cg_wait_restart', 20);
  }, 120_000);
  // A test that failed with the server down leaves it up for the next.
  afterEach(() => {
    if (cluster && !cluster.running()) cluster.start();
  });
  afterAll(() => {
    cluster?.drop();
  });

  const setUp = (schema: string) => {
    const box = sandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: (cluster as SmallCluster).url, CRONGUARD_SCHEMA: schema };
    return { box, env, log: box.path('record'), barrier: box.path('barrier'), ran: box.path('ran') };
  };
  const runs = (schema: string) => onCluster<{ status: string }>(`SELECT status FROM ${schema}.runs ORDER BY id`);

  it('the holder stops (75); the waiter connects again and runs (exit 0); each run recorded once', async () => {
    const c = cluster as SmallCluster;
    const { box, env, log, barrier, ran } = setUp('restart_wait');
    const holder = start(['-n', 'restart-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-v', '-w', '60s', '-n', 'restart-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitFor(bothConnected('restart-wait'), 'the waiter to connect');
    c.stop();
    const lost = await holder.done;
    expect(lost.code).toBe(75);
    expect(lost.stderr).toMatch(/cronguard: restart-wait: lock lost: [^\n]*; command terminated after \S+ \(run 1; cronguard logs 1\)\n$/);
    // Its record waits in the spool for the server.
    expect(spooled(box.stateDir)).toHaveLength(1);
    // The waiter found the server down at a try to connect again, and goes on waiting.
    await waitFor(() => /restart-wait: cannot reach PostgreSQL at [^\n]*: ECONNREFUSED; waiting for it as for the lock\n/.test(said.stderr()), 'the waiter to find the server down');
    c.start();
    const result = await waiter.done;
    release(barrier);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/restart-wait: PostgreSQL reachable again\n/);
    expect(result.stderr).not.toMatch(/^cronguard: (cannot reach|PostgreSQL at)|connection lost|unavailable/m);
    expect(lines(ran)).toEqual(['ran']);
    expect(lines(log)).toEqual([expect.stringMatching(/^start /)]);
    // The waiter delivered the holder's record when it reached the server again.
    expect(spooled(box.stateDir)).toHaveLength(0);
    expect((await runs('restart_wait')).map((r) => r.status)).toEqual(['lock_lost', 'succeeded']);
  }, 120_000);

  it('a server still down when the wait is over: 69, one line, nothing run', async () => {
    const c = cluster as SmallCluster;
    const { box, env, log, barrier, ran } = setUp('down_wait');
    const holder = start(['-n', 'down-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-w', '3s', '-n', 'down-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    await waitFor(bothConnected('down-wait'), 'the waiter to connect');
    c.stop();
    const result = await waiter.done;
    expect((await holder.done).code).toBe(75);
    release(barrier);
    c.start();
    expect(result.code).toBe(69);
    expect(result.stderr).toMatch(/^cronguard: cannot reach PostgreSQL at postgres@127\.0\.0\.1:\d+\/test: ECONNREFUSED\n$/);
    expect(lines(ran)).toEqual([]);
    // Only the holder's run, started before the restart; its end waits in the spool (beside,
    // if the restart caught the waiter's admission in flight, that admission's: nothing ran).
    expect((await runs('down_wait')).map((r) => r.status)).toEqual(['running']);
    expect(spooled(box.stateDir).filter((f) => f.includes(`_${holder.child.pid}_`))).toHaveLength(1);
  }, 120_000);

  it('-l lease: the holder keeps its lease through the restart; the waiter connects again and runs after it', async () => {
    const c = cluster as SmallCluster;
    const { box, env, log, barrier, ran } = setUp('lease_wait');
    const holder = start(['-l', 'lease', '-n', 'lease-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-l', 'lease', '-v', '-w', '60s', '-n', 'lease-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitFor(() => said.stderr().includes('is held; waiting up to 1m00s for it'), 'the waiter to wait');
    c.stop();
    await waitFor(() => /lease-wait: cannot reach PostgreSQL at [^\n]*; waiting for it as for the lock\n/.test(said.stderr()), 'the waiter to find the server down');
    c.start();
    await waitFor(() => said.stderr().includes('lease-wait: PostgreSQL reachable again'), 'the waiter to connect again');
    release(barrier);
    const [held, result] = await Promise.all([holder.done, waiter.done]);
    expect(held).toMatchObject({ code: 0, stderr: '' });
    expect(result.code).toBe(0);
    expect(lines(ran)).toEqual(['ran']);
    expect(lines(log)).toEqual([expect.stringMatching(/^start /), expect.stringMatching(/^end /)]);
    expect(spooled(box.stateDir)).toHaveLength(0);
    expect((await runs('lease_wait')).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  }, 120_000);
});
