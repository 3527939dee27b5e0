import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, start, startMany, waitFor } from '../helpers.js';
import { advisoryLocksOf, pgRuns, pgSandbox, proxy, sql } from '../pg-helpers.js';
import { hasPgbouncer, PGBOUNCER, type Pgbouncer, startPgbouncer } from '../pgbouncer.js';

// -l lease (issue 20): a lease row per lock key, taken inside the admission statement,
// renewed over any connection, fenced by the holder's own clock. Real PgBouncer in
// transaction pooling, a TCP proxy the test cuts, a SIGKILLed wrapper.
let pooler: Pgbouncer | null = null;

async function leases(schema: string): Promise<{ job: string; epoch: string }[]> {
  return sql(`SELECT job, epoch::text FROM ${schema}.leases WHERE expires_at > now()`);
}

// The marks fenced.sh left: [kind, ms, token?].
function marks(file: string): string[][] {
  return lines(file).map((l) => l.split(' '));
}

describe('-l lease: bad input', () => {
  for (const [args, message] of [
    [['-l', 'lease', '--lease-ttl', '4s'], /--lease-ttl: '4s' is shorter than the minimum, 5s/],
    [['--lease-ttl', '10s'], /--lease-ttl applies to the lease lock backend only/],
    [['-l', 'lease', '--no-log'], /cannot go with --no-log/],
  ] as const) {
    it(`${args.join(' ')}: exit 64, one line, nothing run`, async () => {
      const box = pgSandbox();
      const result = await cronguard([...args, '-n', box.job('bad'), '--', 'sh', '-c', `touch ${box.path('ran')}`], box.env);
      expect(result.code).toBe(64);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.stderr).toMatch(message);
      expect(lines(box.path('ran'))).toEqual([]);
    });
  }

  it('-l lease without a database: exit 64, one line, nothing run', async () => {
    const box = pgSandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: '' };
    const result = await cronguard(['-l', 'lease', '-n', box.job('nodb'), '--', 'sh', '-c', `touch ${box.path('ran')}`], env);
    expect(result.code).toBe(64);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/lock backend lease needs a database/);
    expect(lines(box.path('ran'))).toEqual([]);
  });
});

describe('-l lease', () => {
  it('gives the command CRONGUARD_FENCING_TOKEN, growing from run to run, and leaves no lease behind', async () => {
    const box = pgSandbox();
    const job = box.job('token');
    const out = box.path('tokens');
    for (let i = 0; i < 3; i++) {
      const result = await cronguard(['-l', 'lease', '--every-tick', '-n', job, '--', 'sh', '-c', `echo "$CRONGUARD_FENCING_TOKEN $CRONGUARD_JOB" >> ${out}`], box.env);
      expect(result).toMatchObject({ code: 0, stderr: '' });
    }
    const tokens = lines(out).map((l) => l.split(' '));
    expect(tokens.map((t) => t[1])).toEqual([job, job, job]);
    const numbers = tokens.map((t) => Number(t[0]));
    expect(numbers.every((n) => Number.isInteger(n) && n > 0)).toBe(true);
    expect(numbers[1]).toBeGreaterThan(numbers[0] as number);
    expect(numbers[2]).toBeGreaterThan(numbers[1] as number);
    expect(await leases(box.schema)).toEqual([]);
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  });

  it('cut off from its database, the holder stops its command (75, lock_lost) before its lease expires; the next holder starts after that', async () => {
    const box = pgSandbox();
    const job = box.job('fence');
    const cut = await proxy();
    try {
      const first = box.path('first');
      const holder = start(['-l', 'lease', '--lease-ttl', '6s', '-n', job, '--every-tick', '--', fixture('fenced.sh'), first], {
        ...box.env,
        CRONGUARD_DATABASE_URL: cut.url,
      });
      await waitFor(() => lines(first).length > 2, 'the first command to run');
      await cut.stop();
      const cutAt = Date.now();
      // Another host, straight to the database, waits for the lease.
      const second = box.path('second');
      const next = start(['-l', 'lease', '-w', '60s', '-n', job, '--every-tick', '--', 'sh', '-c', `echo "start $(date +%s%3N)" >> ${second}`], box.env);
      const ended = await holder.done;
      expect(ended.stderr).toMatch(/lock lost|lease/);
      expect(ended.code).toBe(75);
      expect((await next.done).code).toBe(0);
      const lastAlive = Math.max(...marks(first).map((m) => Number(m[1])));
      // Stopped before its lease could expire: its last sign of life at most the ttl after the
      // cut (its last renewal was before), by the command's own clock, whatever the load.
      expect(lastAlive).toBeLessThan(cutAt + 6000);
      const secondStart = Number(marks(second)[0]?.[1]);
      expect(secondStart).toBeGreaterThan(lastAlive);
      // cronguard's own kill signal came first, not the watchdog's SIGKILL.
      expect(marks(first).some((m) => m[0] === 'term')).toBe(true);
      // Its spooled record goes in with the next run on this host that starts after it.
      expect((await cronguard(['-l', 'lease', '-n', job, '--every-tick', '--', 'true'], box.env)).code).toBe(0);
      expect((await pgRuns(box.schema)).map((r) => [r.status, r.exit_code])).toEqual([['lock_lost', 143], ['succeeded', 0], ['succeeded', 0]]);
    } finally {
      await cut.close();
    }
  });

  it('a SIGKILLed wrapper: its command dies with it, and the next run starts after the lease expired', async () => {
    const box = pgSandbox();
    const job = box.job('sigkill');
    const first = box.path('first');
    const holder = start(['-l', 'lease', '--lease-ttl', '5s', '-n', job, '--every-tick', '--', fixture('fenced.sh'), first], box.env);
    await waitFor(() => lines(first).length > 2, 'the first command to run');
    holder.child.kill('SIGKILL');
    await holder.done;
    const [row] = await sql<{ expires_at: Date }>(`SELECT expires_at FROM ${box.schema}.leases`);
    expect(row).toBeDefined();
    const second = box.path('second');
    const next = await cronguard(['-l', 'lease', '-w', '60s', '-n', job, '--every-tick', '--', 'sh', '-c', `echo "start $(date +%s%3N)" >> ${second}`], box.env);
    expect(next.code).toBe(0);
    const lastAlive = Math.max(...marks(first).map((m) => Number(m[1])));
    const secondStart = Number(marks(second)[0]?.[1]);
    expect(secondStart).toBeGreaterThan(lastAlive);
    // Not before the lease expired (the server's clock is this machine's).
    expect(secondStart).toBeGreaterThanOrEqual((row as { expires_at: Date }).expires_at.getTime());
    const statuses = (await pgRuns(box.schema)).map((r) => r.status);
    expect(statuses).toEqual(['abandoned', 'succeeded']);
  });
});

const title = hasPgbouncer ? '-l lease behind PgBouncer (transaction pooling)' : `-l lease behind PgBouncer: skipped, ${PGBOUNCER} is missing`;
describe.skipIf(!hasPgbouncer)(title, () => {
  beforeAll(async () => {
    pooler = await startPgbouncer({ poolMode: 'transaction' });
  });
  afterAll(async () => {
    await pooler?.stop();
  });

  it('20 simultaneous invocations: exactly one runs; nothing left behind', async () => {
    const box = pgSandbox();
    const job = box.job('twenty');
    const env = { ...box.env, CRONGUARD_DATABASE_URL: (pooler as Pgbouncer).url };
    const log = box.path('record');
    const barrier = box.path('barrier');
    const many = startMany(20, ['-l', 'lease', '-n', job, '--every-tick', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => many.exited() === 19, 'the 19 others to skip');
    release(barrier);
    const results = await many.done;
    expect(results.map((r) => r.code)).toEqual(Array(20).fill(0));
    expect(results.filter((r) => r.stderr !== '')).toEqual([]);
    expect(lines(log).filter((l) => l.startsWith('start'))).toHaveLength(1);
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => [r.status, r.overlaps])).toEqual([['succeeded', 19]]);
    expect(await leases(box.schema)).toEqual([]);
  });

  it('a second copy while the first runs: no overlap; no LISTEN, no advisory lock, nothing left behind', async () => {
    const box = pgSandbox();
    const job = box.job('second');
    const env = { ...box.env, CRONGUARD_DATABASE_URL: (pooler as Pgbouncer).url };
    const log = box.path('record');
    const barrier = box.path('barrier');
    const first = start(['-l', 'lease', '--lease-ttl', '5s', '-n', job, '--every-tick', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the first command to start');
    expect(await leases(box.schema)).toHaveLength(1);
    // Past a renewal or two, through the pool.
    await new Promise((r) => setTimeout(r, 4000));
    const second = await cronguard(['-l', 'lease', '-n', job, '--every-tick', '--', fixture('hold.sh'), log, barrier], env);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    release(barrier);
    expect((await first.done).code).toBe(0);
    expect(lines(log).filter((l) => l.startsWith('start'))).toHaveLength(1);
    expect(await leases(box.schema)).toEqual([]);
    expect(await advisoryLocksOf(job, box.schema)).toEqual([]);
  });
});
