import { describe, expect, it } from 'vitest';
import { advisoryKey } from '../../src/store/postgres/lock.js';
import { cronguard, fixture, isAlive, lines, release, sandbox, serialRuns, start, startMany, waitFor } from '../helpers.js';
import { backendOf, holdingClient, pgRuns, pgSandbox, sql } from '../pg-helpers.js';


describe('postgres lock', () => {
  it('computes the documented key, the same as the SQL formula', async () => {
    const name = 'backup';
    const [row] = await sql<{ key: string }>(
      `SELECT ('x' || left(encode(sha256(convert_to('cronguard:' || $1, 'UTF8')), 'hex'), 16))::bit(64)::bigint::text AS key`,
      [name],
    );
    expect(row?.key).toBe(advisoryKey(name).toString());
  });

  it('of 32 simultaneous invocations, exactly one runs and one row is written', async () => {
    const box = pgSandbox();
    const job = box.job('many');
    const log = box.path('record');
    const barrier = box.path('barrier');
    await cronguard(['migrate'], box.env);
    const many = startMany(32, ['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    // Whoever got the lock holds it until the barrier exists, so every other one met it held.
    await waitFor(() => many.exited() === 31, 'all but one invocation to skip');
    await waitFor(() => lines(log).length > 0, 'the one holding the lock to start its command');
    expect(lines(log)).toEqual([expect.stringMatching(/^start \d+$/)]);
    release(barrier);
    for (const result of await many.done) expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(serialRuns(log)).toBe(1);
    const rows = await pgRuns(box.schema);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ job, status: 'succeeded', exit_code: 0, overlaps: 31 });
  });

  it('skips while another client holds pg_advisory_lock of the job key', async () => {
    const box = pgSandbox();
    const job = box.job('held');
    const other = await holdingClient();
    await other.query('SELECT pg_advisory_lock($1::bigint)', [advisoryKey(job, box.schema).toString()]);
    const result = await cronguard(['-n', job, '-E', '3', '--', 'touch', box.path('ran')], box.env);
    await other.end();
    expect(result).toMatchObject({ code: 3, stdout: '', stderr: '' });
    expect(lines(box.path('ran'))).toEqual([]);
    expect(await pgRuns(box.schema)).toEqual([]);
  });

  it('uses --lock-key to share a lock the application takes', async () => {
    const box = pgSandbox();
    const key = String(BigInt(`0x${box.schema.slice(2)}`));
    const other = await holdingClient();
    await other.query('SELECT pg_advisory_lock($1::bigint)', [key]);
    const held = await cronguard(['-n', box.job('k'), '--lock-key', key, '-E', '4', '--', 'true'], box.env);
    await other.end();
    expect(held.code).toBe(4);
    const free = await cronguard(['-n', box.job('k'), '--lock-key', key, '--', 'true'], box.env);
    expect(free.code).toBe(0);
  });

  it('waits for the lock with -w', async () => {
    const box = pgSandbox();
    const job = box.job('wait');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const holder = start(['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start');
    const holderBackend = await backendOf(job);
    const waiter = start(['-n', job, '-w', '90s', '--', fixture('record.sh'), log], box.env);
    // The waiter's session has finished an admission (which tries the lock) while the lock
    // was held: from then on, the waiter is waiting. (Its -w only turns a hang into a
    // failure.)
    const triedOnce = async () =>
      (
        await sql(
          `SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND pid <> $2 AND state = 'idle'
             AND query LIKE '%admit(%'`,
          [`cronguard:${job}`.slice(0, 63), holderBackend],
        )
      ).length > 0;
    await waitFor(triedOnce, 'the waiter to try the lock');
    release(barrier);
    expect((await holder.done).code).toBe(0);
    expect((await waiter.done).code).toBe(0);
    expect(serialRuns(log)).toBe(2);
    expect((await pgRuns(box.schema)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });

  it('terminates the command and exits 75 when the lock session is killed', async () => {
    const box = pgSandbox();
    const job = box.job('lost');
    const pids = box.path('pids');
    const run = start(['-n', job, '--kill-after', '1s', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the command to start');
    const backend = await backendOf(job);
    expect(backend).not.toBeNull();
    await sql('SELECT pg_terminate_backend($1)', [backend]);
    const result = await run.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(/lock lost: .*; command terminated/);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    // Recorded exactly once: over a fresh connection, or, when none comes within its bound
    // (a loaded machine), in the spool, said so on stderr and delivered by the next run.
    let [row] = await pgRuns(box.schema);
    if (row?.status === 'running') {
      expect(result.stderr).toMatch(/records go to .* until it can be written/);
      expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
      [row] = await pgRuns(box.schema);
    }
    expect(row).toMatchObject({ status: 'lock_lost' });
  });

  it('lets the command finish with --on-lock-loss continue, and says so', async () => {
    const box = pgSandbox();
    const job = box.job('cont');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const run = start(['-n', job, '--on-lock-loss', 'continue', '--', fixture('hold.sh'), log, barrier], box.env);
    let said = '';
    run.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => lines(log).length > 0, 'the command to start');
    await sql('SELECT pg_terminate_backend($1)', [await backendOf(job)]);
    // The command must still be running when cronguard notices the loss.
    await waitFor(() => said.includes('lock lost'), 'cronguard to notice the lost lock');
    release(barrier);
    const result = await run.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/lock lost .*the command continues/);
    expect(serialRuns(log)).toBe(1);
    const [row] = await pgRuns(box.schema);
    expect(row).toMatchObject({ status: 'succeeded' });
    expect(row?.error).toMatch(/lock lost while running/);
  });

  it('kills the command when the wrapper is SIGKILLed, so no second copy overlaps it', async () => {
    const box = pgSandbox();
    const job = box.job('orphan');
    const log = box.path('record');
    // Never released: only the parent-death signal can end this command.
    const first = start(['-n', job, '--', fixture('hold.sh'), log, box.path('barrier')], box.env);
    const childPid = async () => (await pgRuns(box.schema))[0]?.child_pid ?? null;
    await waitFor(async () => lines(log).length > 0 && (await childPid()) !== null, 'the command to start');
    const commandPid = (await childPid()) as number;
    first.child.kill('SIGKILL');
    await first.done;
    await waitFor(() => !isAlive(commandPid), 'the orphaned command to die');
    const second = await cronguard(['-n', job, '--', 'true'], box.env);
    expect(second.code).toBe(0);
    expect(lines(log)).toEqual([`start ${commandPid}`]);
    const rows = await pgRuns(box.schema);
    expect(rows.map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
    expect(rows[0]?.error).toMatch(/vanished/);
  });

  it('lists held locks with host, pid, job and since', async () => {
    const box = pgSandbox();
    const job = box.job('shown');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const run = start(['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the command to start');
    const result = await cronguard(['locks', '--json'], box.env);
    release(barrier);
    expect((await run.done).code).toBe(0);
    expect(result.code).toBe(0);
    const mine = JSON.parse(result.stdout).find((l: { job: string }) => l.job === job);
    expect(mine).toMatchObject({ job, lock: 'postgres', key: advisoryKey(job, box.schema).toString(), run_id: 1, verified: true });
    expect(mine.pid).toBeGreaterThan(0);
    expect(mine.host).toBeTruthy();
    expect(Date.parse(mine.since)).toBeGreaterThan(0);
  });
});

describe('postgres lock with a sandbox of its own', () => {
  it('needs a database', async () => {
    const result = await cronguard(['-l', 'postgres', '--', 'true'], sandbox().env);
    expect(result.code).toBe(64);
    expect(result.stderr).toMatch(/needs a database/);
  });
});
