import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { migrationKey } from '../../src/store/postgres/lock.js';
import { besides, cronguard, fixture, lines, release, start, waitFor } from '../helpers.js';
import { cuttingProxy } from '../pg-faults.js';
import { holdingClient, pgRuns, pgSandbox, sql } from '../pg-helpers.js';

// -l lease (issue 20) attacked: inputs at the edges, a DBA breaking a lease, a wrapper
// stopped past its ttl, waiters taking turns. Real server, the built binary.

// The marks fenced.sh left: [kind, ms, token?].
function marks(file: string): string[][] {
  return lines(file).map((l) => l.split(' '));
}

describe('-l lease attacked: --lease-ttl at the edges', () => {
  for (const [ttl, message] of [
    ['0', /shorter than the minimum, 5s/],
    ['4999ms', /shorter than the minimum, 5s/],
    ['-5s', /invalid duration/],
    ['soon', /invalid duration/],
    // Past what Node's timers, which renew and fence the lease, can hold.
    ['25d', /longer than the maximum, 24d/],
    ['2147483648ms', /longer than the maximum, 24d/],
  ] as const) {
    it(`--lease-ttl ${ttl}: exit 64, one line, nothing run`, async () => {
      const box = pgSandbox();
      const result = await cronguard(['-l', 'lease', '--lease-ttl', ttl, '-n', box.job('ttl'), '--', 'touch', box.path('ran')], box.env);
      expect(result.stderr).toMatch(message);
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
      expect(result.code).toBe(64);
      expect(lines(box.path('ran'))).toEqual([]);
      expect(await pgRuns(box.schema)).toEqual([]);
    });
  }

  it('--lease-ttl 24d, the longest: runs, and its lease goes with the outcome', async () => {
    const box = pgSandbox();
    const result = await cronguard(['-l', 'lease', '--lease-ttl', '24d', '-n', box.job('long'), '--', 'true'], box.env);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(await sql(`SELECT 1 FROM ${box.schema}.leases`)).toEqual([]);
  });
});

describe('-l lease attacked', () => {
  it('a lease broken by the documented DELETE: the next holder gets a larger epoch, the old one is fenced (75)', async () => {
    const box = pgSandbox();
    const job = box.job('broken');
    const first = box.path('first');
    const holder = start(['-l', 'lease', '--lease-ttl', '6s', '-n', job, '--every-tick', '--', fixture('fenced.sh'), first], box.env);
    await waitFor(() => lines(first).length > 2, 'the first command to run');
    await sql(`DELETE FROM ${box.schema}.leases WHERE job = $1`, [job]);
    const second = box.path('second');
    const barrier = box.path('barrier');
    const next = start(['-l', 'lease', '-n', job, '--every-tick', '--', fixture('hold.sh'), second, barrier], box.env);
    await waitFor(() => lines(second).length > 0, 'the second command to start');
    const ended = await holder.done;
    expect(ended.code).toBe(75);
    // cronguard's one line, as docs/postgres-ha.md quotes it (the shell of the command may say it was
    // Terminated).
    const said = new RegExp(`^cronguard: ${job}: lock lost: lease of -?\\d+ \\(epoch \\d+\\): taken over or broken \\(no longer this holder's\\); command terminated after \\S+ \\(run 1; cronguard logs 1\\)$`);
    expect(ended.stderr.split('\n').filter((l) => l.startsWith('cronguard'))).toEqual([expect.stringMatching(said)]);
    // The old holder's renewals never touched the new lease.
    const [row] = await sql<{ epoch: string; pid: number }>(`SELECT epoch::text, pid FROM ${box.schema}.leases`);
    expect(row?.pid).toBe(next.child.pid);
    expect(BigInt(row?.epoch ?? 0)).toBeGreaterThan(BigInt(marks(first)[0]?.[2] ?? Number.MAX_SAFE_INTEGER));
    release(barrier);
    expect(await next.done).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => [r.status, r.error])).toEqual([
      ['lock_lost', expect.stringMatching(/^lock lost: lease of .*no longer this holder's\); command terminated$/)],
      ['succeeded', null],
    ]);
    expect(await sql(`SELECT 1 FROM ${box.schema}.leases`)).toEqual([]);
  });

  it('a wrapper stopped past its ttl: its command is gone before a waiter takes the lease; it exits 75 once it runs again', async () => {
    const box = pgSandbox();
    const job = box.job('stall');
    const log = box.path('log');
    const holder = start(['-l', 'lease', '--lease-ttl', '5s', '-n', job, '--every-tick', '--', fixture('hold.sh'), log, box.path('never')], box.env);
    await waitFor(() => lines(log).length > 0, 'the command to start');
    const command = Number(lines(log)[0]?.split(' ')[1]);
    holder.child.kill('SIGSTOP');
    let waiter: Awaited<ReturnType<typeof cronguard>>;
    try {
      waiter = await cronguard(['-l', 'lease', '-w', '10m', '-n', job, '--every-tick', '--', ...besides(command, box.path('seen'))], box.env);
    } finally {
      holder.child.kill('SIGCONT');
    }
    expect(waiter).toMatchObject({ code: 0, stderr: '' });
    expect(lines(box.path('seen'))).toEqual(['alone']);
    const result = await holder.done;
    expect(result.code).toBe(75);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['lock_lost', 'succeeded']);
    expect(await sql(`SELECT 1 FROM ${box.schema}.leases`)).toEqual([]);
  });

  it('waiters take turns: each starts only after the one before ended, and all run', async () => {
    const box = pgSandbox();
    const job = box.job('turns');
    const log = box.path('log');
    const script = `echo "start $(date +%s%3N)" >> ${log}; sleep 0.3; echo "end $(date +%s%3N)" >> ${log}`;
    const all = await Promise.all(
      Array.from({ length: 6 }, () => cronguard(['-l', 'lease', '-w', '5m', '-n', job, '--every-tick', '--', 'sh', '-c', script], box.env)),
    );
    expect(all.map((r) => [r.code, r.stderr])).toEqual(Array(6).fill([0, '']));
    const seen = marks(log);
    expect(seen).toHaveLength(12);
    for (let i = 0; i < seen.length; i += 2) {
      expect(seen[i]?.[0]).toBe('start');
      expect(seen[i + 1]?.[0]).toBe('end');
    }
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(Array(6).fill('succeeded'));
  });
});

describe('-l lease attacked: connections cut', () => {
  it('the admission committed but its reply lost: 69, one line, nothing ran; the lease frees itself and the next run finds the row abandoned', async () => {
    const box = pgSandbox();
    const job = box.job('lostreply');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const cut = await cuttingProxy('true) AS a', 'reply');
    const result = await cronguard(['-l', 'lease', '--lease-ttl', '5s', '-n', job, '--every-tick', '--', 'touch', box.path('ran')], { ...box.env, CRONGUARD_DATABASE_URL: cut.url });
    expect(result.code).toBe(69);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(lines(box.path('ran'))).toEqual([]);
    expect(await sql(`SELECT 1 FROM ${box.schema}.leases`)).toHaveLength(1);
    const next = await cronguard(['-l', 'lease', '--lease-ttl', '5s', '-w', '1m', '-n', job, '--every-tick', '--', 'true'], box.env);
    expect(next).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
    expect(await sql(`SELECT 1 FROM ${box.schema}.leases`)).toEqual([]);
  });

  it('a renewal whose reply is lost (the server renewed): the holder goes on and ends normally, recorded once', async () => {
    const box = pgSandbox();
    const job = box.job('renewreply');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const cut = await cuttingProxy('renewed_at = now()', 'reply');
    const log = box.path('log');
    const barrier = box.path('barrier');
    const holder = start(['-l', 'lease', '--lease-ttl', '6s', '-n', job, '--every-tick', '--', fixture('hold.sh'), log, barrier], { ...box.env, CRONGUARD_DATABASE_URL: cut.url });
    await cut.reached;
    const renewed = async () => (await sql(`SELECT 1 FROM ${box.schema}.leases WHERE renewed_at > now() - interval '1 second'`)).length > 0;
    await new Promise((r) => setTimeout(r, 1500));
    await waitFor(renewed, 'a renewal after the lost one');
    release(barrier);
    expect(await holder.done).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded']);
    expect(await sql(`SELECT 1 FROM ${box.schema}.leases`)).toEqual([]);
  });

  it('a renewal left unanswered: given up in time for another over a connection of its own; the holder goes on', async () => {
    const box = pgSandbox();
    const job = box.job('renewstuck');
    expect((await cronguard(['migrate'], box.env)).code).toBe(0);
    const cut = await cuttingProxy('renewed_at = now()', 'request');
    const log = box.path('log');
    const barrier = box.path('barrier');
    const holder = start(['-l', 'lease', '--lease-ttl', '9s', '-n', job, '--every-tick', '--', fixture('hold.sh'), log, barrier], { ...box.env, CRONGUARD_DATABASE_URL: cut.url });
    let ended = false;
    void holder.done.then(() => (ended = true));
    await cut.reached;
    const [before] = await sql<{ renewed_at: Date }>(`SELECT renewed_at FROM ${box.schema}.leases`);
    // The stuck renewal never reaches the server: a later one did, over another connection.
    const renewedSince = async () => (await sql(`SELECT 1 FROM ${box.schema}.leases WHERE renewed_at > $1`, [before?.renewed_at])).length > 0;
    await waitFor(async () => ended || (await renewedSince()), 'a renewal over another connection (or the holder to give up)');
    expect(ended).toBe(false);
    // And past the time the stuck one alone would have lost the lease in (0.6 of the ttl).
    await waitFor(async () => ended || (await sql(`SELECT 1 FROM ${box.schema}.leases WHERE renewed_at > $1::timestamptz + interval '6 seconds'`, [before?.renewed_at])).length > 0, 'another renewal');
    expect(ended).toBe(false);
    release(barrier);
    // The log's own session is still stuck behind the renewal: cut, its outcome goes over another.
    await waitFor(() => lines(log).length > 1, 'the command to end');
    cut.cut();
    const result = await holder.done;
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded']);
    expect(await sql(`SELECT 1 FROM ${box.schema}.leases`)).toEqual([]);
  });
});

describe('-l lease attacked: a schema made by the first run', () => {
  it('the lease counts from the admission statement, not from before the schema was made: the run goes on', async () => {
    const box = pgSandbox();
    const job = box.job('fresh');
    // Another host migrating the same schema holds its migration lock for longer than the
    // lease could go unrenewed (2.5 s at 5 s).
    const other = await holdingClient();
    try {
      await other.query('SELECT pg_advisory_lock($1::bigint)', [migrationKey(box.schema).toString()]);
      const run = start(['-l', 'lease', '--lease-ttl', '5s', '-n', job, '--every-tick', '--', 'touch', box.path('ran')], box.env);
      await waitFor(async () => (await sql(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)).length > 0, 'the run to wait for the migration lock');
      await new Promise((r) => setTimeout(r, 3000));
      await other.query('SELECT pg_advisory_unlock_all()');
      expect(await run.done).toMatchObject({ code: 0, stderr: '' });
    } finally {
      await other.end();
    }
    expect(existsSync(box.path('ran'))).toBe(true);
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded']);
  });
});

describe('-l lease attacked: schemas and --lock-key', () => {
  it('the same job in two schemas: two leases, both run at once', async () => {
    const one = pgSandbox();
    const two = pgSandbox();
    const job = one.job('shared');
    const barrier = one.path('barrier');
    const logs = [one.path('a'), one.path('b')];
    const first = start(['-l', 'lease', '-n', job, '--every-tick', '--', fixture('hold.sh'), logs[0] as string, barrier], one.env);
    await waitFor(() => lines(logs[0] as string).length > 0, 'the first schema\'s command to start');
    const second = start(['-l', 'lease', '-n', job, '--every-tick', '--', fixture('hold.sh'), logs[1] as string, barrier], two.env);
    await waitFor(() => lines(logs[1] as string).length > 0, 'the second schema\'s command to start, beside the first');
    release(barrier);
    expect((await Promise.all([first.done, second.done])).map((r) => [r.code, r.stderr])).toEqual([[0, ''], [0, '']]);
    for (const box of [one, two]) expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded']);
  });

  // A lease is a row of its schema: neither another schema's job given the key nor an
  // application holding pg_advisory_lock(N) would keep it out, as --lock-key promises.
  it('--lock-key with -l lease is refused: 64, one line, nothing run or recorded', async () => {
    const box = pgSandbox();
    const app = await holdingClient();
    try {
      await app.query('SELECT pg_advisory_lock(7)');
      const result = await cronguard(['-l', 'lease', '--lock-key', '7', '-n', box.job('keyed'), '--', 'touch', box.path('ran')], box.env);
      expect(result).toMatchObject({ code: 64, stdout: '' });
      expect(result.stderr).toBe(
        "cronguard: --lock-key shares a PostgreSQL advisory lock, which -l lease does not take (a lease is a row of its schema's run log, unseen by pg_advisory_lock and by other schemas): use -l postgres --lock-key N, or leave --lock-key out (see cronguard --help)\n",
      );
    } finally {
      await app.end();
    }
    expect(existsSync(box.path('ran'))).toBe(false);
    expect(await pgRuns(box.schema)).toEqual([]);
  });
});
