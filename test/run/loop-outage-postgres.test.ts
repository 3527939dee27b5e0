import { afterEach, describe, expect, it } from 'vitest';
import { collected, cronguard, fixture, lines, spooled, start, waitFor } from '../helpers.js';
import { type PgProxy, pgRuns, pgSandbox, proxy, sql } from '../pg-helpers.js';

let current: PgProxy | null = null;
afterEach(async () => {
  await current?.close();
  current = null;
});

const sessions = async (job: string) =>
  (await sql('SELECT 1 FROM pg_stat_activity WHERE application_name = $1', [`cronguard:${job}`.slice(0, 63)])).length;

// A loop (--for) holding a local lock, its run log PostgreSQL seen through a proxy that the
// test stops and starts again.
describe('a loop whose run log goes away and comes back', () => {
  it('reconnects, listens again and serves the requests made meanwhile and after (--on-request, flock)', async () => {
    const box = pgSandbox();
    const job = box.job('deaf');
    const log = box.path('log');
    current = await proxy();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: current.url };
    expect((await cronguard(['migrate'], env)).code).toBe(0);
    const loop = start(['-v', '-l', 'flock', '-n', job, '--on-request', '--for', '1h', '--', fixture('args.sh'), log], env);
    const said = collected(loop);
    await waitFor(() => said.stderr().includes('holding'), 'the loop to hold the lock');
    const served = (target: string) => waitFor(() => lines(log).some((l) => l.endsWith(` ${target}`)), `the request for ${target} to be served`, 20_000);
    await cronguard(['request', job, '--', 'before'], box.env);
    await served('before');
    await waitFor(async () => (await sql(`SELECT 1 FROM "${box.schema}".requests WHERE status = 'succeeded'`)).length === 1, 'its run to be recorded');

    await current.stop();
    await waitFor(async () => (await sessions(job)) === 0, 'the loop\'s session to end');
    await cronguard(['request', job, '--', 'meanwhile'], box.env);
    await current.start();
    await served('meanwhile');
    await cronguard(['request', job, '--', 'after'], box.env);
    await served('after');

    loop.child.kill('SIGTERM');
    const result = await loop.done;
    expect(result.code).toBe(143);
    expect(result.stderr).toMatch(/run log .* unavailable \(look for requests: connection lost: .*\); reconnected\n/);
    const requests = await sql<{ status: string }>(`SELECT status FROM "${box.schema}".requests ORDER BY id`);
    expect(requests.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect((await pgRuns(box.schema)).map((r) => [r.trigger, r.status])).toEqual([
      ['request', 'succeeded'],
      ['request', 'succeeded'],
      ['request', 'succeeded'],
    ]);
  });

  it('an --every loop spools its runs while the log is away and delivers them itself once it is back', async () => {
    const box = pgSandbox();
    const job = box.job('spooling');
    const log = box.path('log');
    current = await proxy();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: current.url };
    expect((await cronguard(['migrate'], env)).code).toBe(0);
    const loop = start(['-l', 'flock', '-n', job, '--every', '200ms', '--for', '1h', '--', fixture('args.sh'), log], env);
    await waitFor(async () => (await pgRuns(box.schema)).length > 0, 'a first recorded run');
    await current.stop();
    await waitFor(() => spooled(box.stateDir).length > 0, 'a run spooled while the log is away');
    await current.start();
    await waitFor(() => spooled(box.stateDir).length === 0, 'the loop to deliver the spool', 20_000);
    const runs = lines(log).filter((l) => l.startsWith('start')).length;
    await waitFor(async () => (await pgRuns(box.schema)).length > runs, 'a run recorded directly again', 20_000);
    loop.child.kill('SIGTERM');
    expect((await loop.done).code).toBe(143);
    const rows = await pgRuns(box.schema);
    expect(new Set(rows.map((r) => r.run_key)).size).toBe(rows.length);
  });
});
