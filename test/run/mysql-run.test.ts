import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { cronguard, fixture, isAlive, lines, release, serialRuns, spooled, start, startMany, waitFor } from '../helpers.js';
import { mysqlQuery, mysqlSandbox, mysqlUrl } from '../mysql-helpers.js';

// A run with MySQL as lock and log: the lock and the run's record on one connection, and
// what a user sees when the lock or the server goes.

interface RunRow {
  id: number;
  job: string;
  status: string;
  exit_code: number | null;
  overlaps: number;
  lock_backend: string;
  lock_key: string | null;
}

const runsOf = (database: string) =>
  mysqlQuery<RunRow>(`SELECT id, job, status, exit_code, overlaps, lock_backend, lock_key FROM \`${database}\`.runs ORDER BY id`);

const servers: Server[] = [];
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

// A port nobody listens on yet; `open()` then forwards it to the test server: the same URL,
// first out of reach, then back.
async function laterServer(): Promise<{ url: string; open(): Promise<void> }> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise((resolve) => probe.close(resolve));
  const target = new URL(mysqlUrl());
  const url = new URL(mysqlUrl());
  url.port = String(port);
  return {
    url: url.toString(),
    open: async () => {
      const server = createServer((client) => {
        const upstream = connect(Number(target.port || 3306), target.hostname);
        for (const socket of [client, upstream]) {
          sockets.add(socket);
          socket.on('error', () => {});
          socket.on('close', () => sockets.delete(socket));
        }
        client.pipe(upstream).pipe(client);
      });
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    },
  };
}

describe('a run with MySQL', () => {
  it('of 32 simultaneous invocations, exactly one runs: one row, 31 skips counted on it', async () => {
    const box = mysqlSandbox();
    const job = box.job('many');
    const log = box.path('record');
    const barrier = box.path('barrier');
    // The tables exist first, so the 32 race for the lock, not for creating them.
    expect((await cronguard(['-n', box.job('first'), '--', 'true'], box.env)).code).toBe(0);
    const many = startMany(32, ['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => many.exited() === 31, 'all but one invocation to skip');
    await waitFor(() => lines(log).length > 0, 'the one holding the lock to start its command');
    release(barrier);
    for (const result of await many.done) expect(result).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(serialRuns(log)).toBe(1);
    const rows = (await runsOf(box.database)).filter((r) => r.job === job);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ job, status: 'succeeded', exit_code: 0, overlaps: 31, lock_backend: 'mysql', lock_key: mysqlLockName(box.database, job) });
  });

  it('KILL of the lock connection mid-run: the command is stopped, 75, the row says lock_lost', async () => {
    const box = mysqlSandbox();
    const job = box.job('lost');
    const pids = box.path('pids');
    const run = start(['-n', job, '--kill-after', '1s', '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the command to start');
    const [held] = await mysqlQuery<{ id: number | null }>('SELECT IS_USED_LOCK(?) AS id', [mysqlLockName(box.database, job)]);
    expect(held?.id).not.toBeNull();
    await mysqlQuery(`KILL ${Number(held?.id)}`);
    const result = await run.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(/lock lost: .*; command terminated/);
    for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    const rows = await runsOf(box.database);
    expect(rows).toMatchObject([{ job, status: 'lock_lost' }]);
  });

  it('-l flock with the MySQL log out of reach: runs and spools; the next run with the server back delivers it, once', async () => {
    const box = mysqlSandbox();
    const job = box.job('spool');
    const server = await laterServer();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: server.url };
    const down = await cronguard(['-l', 'flock', '-n', job, '--', 'touch', box.path('first')], env);
    expect(down.code).toBe(0);
    expect(down.stderr).toMatch(/unavailable \(open: cannot reach MySQL at .*: ECONNREFUSED\); records go to /);
    expect(lines(box.path('first'))).toEqual([]);
    expect(spooled(box.stateDir)).toHaveLength(1);
    await server.open();
    for (const name of ['second', 'third']) {
      const up = await cronguard(['-l', 'flock', '-n', job, '--', 'touch', box.path(name)], env);
      expect(up).toMatchObject({ code: 0, stderr: '' });
    }
    expect(spooled(box.stateDir)).toEqual([]);
    const rows = await runsOf(box.database);
    expect(rows.map((r) => [r.job, r.status, r.lock_backend])).toEqual([
      [job, 'succeeded', 'flock'],
      [job, 'succeeded', 'flock'],
      [job, 'succeeded', 'flock'],
    ]);
  });

  it('a spooled record the server refuses for its content is set aside with one line; the others are delivered', async () => {
    const box = mysqlSandbox();
    const job = box.job('refused');
    const server = await laterServer();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: server.url };
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'while down'], env)).code).toBe(0);
    const dir = join(box.stateDir, 'spool', readdirSync(join(box.stateDir, 'spool'))[0] as string);
    const record = JSON.parse(readFileSync(join(dir, spooled(box.stateDir)[0] as string), 'utf8'));
    // A pid beyond the column's INT: MySQL refuses it (SQLSTATE 22003), every time.
    writeFileSync(join(dir, 'refused.json'), JSON.stringify({ ...record, run: { ...record.run, runKey: 'refused', pid: 2 ** 40 } }));
    await server.open();
    const up = await cronguard(['-l', 'flock', '-n', job, '--', 'echo', 'back up'], env);
    expect(up.code).toBe(0);
    expect(up.stderr).toMatch(/^cronguard: spooled run record \S+\/refused\.json cannot be delivered \(refused: .*[Oo]ut of range.*\); moved aside to \S+\n$/);
    expect((await runsOf(box.database)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
    expect(spooled(box.stateDir)).toEqual([]);
    expect(readdirSync(dir).map((name) => name.replace(/\.bad-.*/, '.bad'))).toEqual(['refused.json.bad']);
  });

  it('a spooled record goes only into the database it was meant for (--schema), not another one on the same server', async () => {
    const box = mysqlSandbox();
    const other = mysqlSandbox();
    const job = box.job('scoped');
    const server = await laterServer();
    const env = (database: string) => ({ ...box.env, CRONGUARD_DATABASE_URL: server.url, CRONGUARD_SCHEMA: database });
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'true'], env(box.database))).code).toBe(0);
    expect(spooled(box.stateDir)).toHaveLength(1);
    await server.open();
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'true'], env(other.database))).code).toBe(0);
    expect(spooled(box.stateDir)).toHaveLength(1);
    expect(await runsOf(other.database)).toHaveLength(1);
    expect((await cronguard(['-l', 'flock', '-n', job, '--', 'true'], env(box.database))).code).toBe(0);
    expect(spooled(box.stateDir)).toEqual([]);
    expect(await runsOf(box.database)).toHaveLength(2);
    expect(await runsOf(other.database)).toHaveLength(1);
  });

  it('a SIGKILLed wrapper: its command ended by the watchdog, the lock freed, and its row settled by the next run', async () => {
    const box = mysqlSandbox();
    const job = box.job('killed');
    const pids = box.path('pids');
    const run = start(['-n', job, '--', fixture('tree.sh'), pids], box.env);
    await waitFor(() => lines(pids).length === 3, 'the command to start');
    run.child.kill('SIGKILL');
    await run.done;
    await waitFor(() => lines(pids).map(Number).every((pid) => !isAlive(pid)), 'the watchdog to end the command');
    await waitFor(
      async () => (await mysqlQuery<{ id: number | null }>('SELECT IS_USED_LOCK(?) AS id', [mysqlLockName(box.database, job)]))[0]?.id === null,
      'the server to free the lock',
    );
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    expect((await runsOf(box.database)).map((r) => r.status)).toEqual(['abandoned', 'succeeded']);
  });

  it('waits for the lock with -w, then runs: two rows, one after the other', async () => {
    const box = mysqlSandbox();
    const job = box.job('wait');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const holder = start(['-n', job, '--', fixture('hold.sh'), log, barrier], box.env);
    await waitFor(() => lines(log).length > 0, 'the holder to start');
    const waiter = start(['-v', '-n', job, '-w', '90s', '--', fixture('record.sh'), log], box.env);
    let said = '';
    waiter.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    // Said once its first admission found the lock held: from then on it is waiting.
    await waitFor(() => said.includes('is held; waiting up to'), 'the waiter to find the lock held');
    release(barrier);
    expect((await holder.done).code).toBe(0);
    expect((await waiter.done).code).toBe(0);
    expect(serialRuns(log)).toBe(2);
    expect((await runsOf(box.database)).map((r) => r.status)).toEqual(['succeeded', 'succeeded']);
  });

  it('--on-lock-loss continue: the command goes on after KILL of the lock connection, and its end is recorded', async () => {
    const box = mysqlSandbox();
    const job = box.job('cont');
    const log = box.path('record');
    const barrier = box.path('barrier');
    const run = start(['-n', job, '--on-lock-loss', 'continue', '--', fixture('hold.sh'), log, barrier], box.env);
    let said = '';
    run.child.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(() => lines(log).length > 0, 'the command to start');
    const [held] = await mysqlQuery<{ id: number | null }>('SELECT IS_USED_LOCK(?) AS id', [mysqlLockName(box.database, job)]);
    await mysqlQuery(`KILL ${Number(held?.id)}`);
    await waitFor(() => said.includes('lock lost'), 'cronguard to notice the lost lock');
    release(barrier);
    const result = await run.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/lock lost .*the command continues/);
    expect(serialRuns(log)).toBe(1);
    expect((await runsOf(box.database)).map((r) => r.status)).toEqual(['succeeded']);
  });

  it('-v counts the run in MySQL round trips: the lock and the record share them', async () => {
    const box = mysqlSandbox();
    const job = box.job('trips');
    expect((await cronguard(['-n', job, '--', 'true'], box.env)).code).toBe(0);
    const second = await cronguard(['-v', '-n', job, '--', 'true'], box.env);
    expect(second.code).toBe(0);
    expect(second.stderr).toMatch(new RegExp(`${job}: \\d+ MySQL round trips after connecting`));
  });
});
