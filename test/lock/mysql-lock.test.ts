import { describe, expect, it } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { cronguard, fixture, isAlive, lines, release, serialRuns, spooled, start, startMany, waitFor } from '../helpers.js';
import { mysqlClient, mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';

// The mysql lock alone (--no-log: the run log is another file's concern): GET_LOCK on a
// connection of its own, exclusion, the documented name, fencing and a killed wrapper.

// The connection that holds a job's lock, or null once nobody does.
async function holderOf(name: string): Promise<number | null> {
  const [row] = await mysqlQuery<{ id: number | null }>('SELECT IS_USED_LOCK(?) AS id', [name]);
  return row?.id ?? null;
}

describe('mysql lock', () => {
  it('is named as documented: the same name as the SQL formula, 43 characters', async () => {
    for (const [schema, job] of [['cronguard', 'backup'], ['t_ops', 'nightly.report-1'], ['cronguard', 'bäckup']] as const) {
      const [row] = await mysqlQuery<{ name: string }>("SELECT CONCAT('cg:', LEFT(SHA2(CONCAT('cronguard:', ?, ':', ?), 256), 40)) AS name", [schema, job]);
      expect(mysqlLockName(schema, job)).toBe(row?.name);
      expect(mysqlLockName(schema, job)).toHaveLength(43);
    }
    // Two databases (staging, production) never share a job's lock.
    expect(mysqlLockName('a', 'job')).not.toBe(mysqlLockName('b', 'job'));
  });

  it('of 32 simultaneous invocations, exactly one runs', async () => {
    const box = mysqlSandbox();
    const job = box.job('many');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const many = startMany(32, ['--no-log', '-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    // Whoever got the lock holds it until the barrier exists, so every other one met it held.
    await waitFor(() => many.exited() === 31, 'all but one invocation to skip');
    await waitFor(() => lines(log).length > 0, 'the one holding the lock to start its command');
    expect(lines(log)).toEqual([expect.stringMatching(/^start \d+$/)]);
    release(barrier);
    for (const result of await many.done) expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(serialRuns(log)).toBe(1);
    expect(await holderOf(mysqlLockName(box.database, job))).toBeNull();
  });

  it('skips while another connection holds GET_LOCK of the documented name', async () => {
    const box = mysqlSandbox();
    const job = box.job('held');
    const other = await mysqlClient();
    try {
      await other.query("SELECT GET_LOCK(CONCAT('cg:', LEFT(SHA2(CONCAT('cronguard:', ?, ':', ?), 256), 40)), 0)", [box.database, job]);
      const result = await cronguard(['--no-log', '-n', job, '-E', '3', '--', 'touch', box.path('ran')], box.env);
      expect(result).toMatchObject({ code: 3, stdout: '', stderr: '' });
      expect(lines(box.path('ran'))).toEqual([]);
    } finally {
      await other.end();
    }
    const free = await cronguard(['--no-log', '-n', job, '--', 'touch', box.path('ran')], box.env);
    expect(free.code).toBe(0);
  });

  it('terminates the command and exits 75 when the lock connection is killed (KILL id)', async () => {
    const box = mysqlSandbox();
    const job = box.job('lost');
    const pids = box.path('pids');
    const run = start(['--no-log', '-n', job, '--kill-after', '1s', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the command to start');
    const holder = await holderOf(mysqlLockName(box.database, job));
    expect(holder).not.toBeNull();
    await mysqlQuery(`KILL ${Number(holder)}`);
    const result = await run.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(/lock lost: .*; command terminated/);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
  });

  it('a SIGKILLed wrapper: the watchdog ends its command, and the server frees the lock with its connection', async () => {
    const box = mysqlSandbox();
    const job = box.job('killed');
    const name = mysqlLockName(box.database, job);
    const pids = box.path('pids');
    const run = start(['--no-log', '-n', job, '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the command to start');
    expect(await holderOf(name)).not.toBeNull();
    run.child.kill('SIGKILL');
    await run.done;
    await waitFor(() => lines(pids).map(Number).every((pid) => !isAlive(pid)), 'the watchdog to end the command');
    await waitFor(async () => (await holderOf(name)) === null, 'the server to free the lock');
    const next = await cronguard(['--no-log', '-n', job, '--', 'touch', box.path('next')], box.env);
    expect(next.code).toBe(0);
    expect(lines(box.path('next'))).toEqual([]);
  });

  it('server unreachable: 69 with the mysql lock, nothing ran', async () => {
    const box = mysqlSandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: 'mysql://root@127.0.0.1:1/test' };
    const result = await cronguard(['-n', box.job('down'), '--', 'touch', box.path('ran')], env);
    expect(result).toMatchObject({ code: 69, stdout: '', stderr: 'cronguard: cannot reach MySQL at root@127.0.0.1:1/test: ECONNREFUSED\n' });
    expect(lines(box.path('ran'))).toEqual([]);
  });

  it('-l flock with a MySQL log out of reach: the job runs and its record is spooled', async () => {
    const box = mysqlSandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: 'mysql://root@127.0.0.1:1/test' };
    const result = await cronguard(['-l', 'flock', '-n', box.job('spool'), '--', 'touch', box.path('ran')], env);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/run log root@127\.0\.0\.1:1\/test \(database t_\w+\) unavailable \(open: cannot reach MySQL at root@127\.0\.0\.1:1\/test: ECONNREFUSED\); records go to /);
    expect(spooled(box.stateDir)).toHaveLength(1);
  });
});
