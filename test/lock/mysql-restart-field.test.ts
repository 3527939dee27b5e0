import { describe, expect, it } from 'vitest';
import { collected, cronguard, fixture, lines, release, sandbox, spooled, start, waitFor, waitToSay } from '../helpers.js';
import { haveMariadbd, type PrivateMariadb, privateMariadb } from '../mariadb-server.js';
import { mysqlQuery } from '../mysql-helpers.js';

// The server itself goes away mid-run, as in the field: a crash (SIGKILL of mariadbd, an OOM
// kill) or a restart (a clean shutdown for an upgrade). The lock dies with the server, so the
// command must stop (75), nothing may run while the server is away (69), and the run's record
// reaches the log exactly once when the server is back.
describe.skipIf(!haveMariadbd)('a MariaDB server that goes away mid-run', () => {
  it.each([
    ['crashes (SIGKILL)', 'crash'],
    ['shuts down cleanly', 'shutdown'],
  ] as const)('%s: the command stops (75), nothing runs meanwhile (69), the run is recorded once', async (_what, how) => {
    const server = await privateMariadb();
    const box = sandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: server.url, CRONGUARD_SCHEMA: 'cg_field' };
    const log = box.path('record');
    const barrier = box.path('barrier');
    const run = start(['-n', 'nightly', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the command to start');
    await server[how]();
    const lost = await run.done;
    expect(lost.code).toBe(75);
    expect(lost.stdout).toBe('');
    // The record waits in the spool (said once; where the server's loss was first met depends
    // on how far the run had got), and the run's one summary line.
    expect(lost.stderr).toMatch(
      /^cronguard: run log \S+ \(database cg_field\) unavailable \([^\n]*\); records go to \S+ until it can be written\ncronguard: nightly: lock lost: [^\n]*; command terminated after \S+ \(run 1; cronguard logs 1\)\n$/,
    );
    expect(lost.stderr).not.toMatch(/closed state|at \w+ \(|Error:/);
    // The command was stopped: it never reached its end, though the barrier is there now.
    release(barrier);
    expect(lines(log)).toEqual([expect.stringMatching(/^start /)]);
    expect(spooled(box.stateDir)).toHaveLength(1);

    const down = await cronguard(['-n', 'nightly', '--', 'touch', box.path('ran')], env);
    expect(down.code).toBe(69);
    expect(down.stderr).toMatch(/^cronguard: cannot reach MySQL at root@127\.0\.0\.1:\d+\/mysql: ECONNREFUSED\n$/);
    expect(lines(box.path('ran'))).toEqual([]);

    await server.start();
    const next = await cronguard(['-n', 'nightly', '--', 'touch', box.path('ran')], env);
    expect(next).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect(spooled(box.stateDir)).toHaveLength(0);
    const rows = await mysqlQuery<{ status: string; error: string | null }>('SELECT status, error FROM cg_field.runs ORDER BY id', [], server.url);
    expect(rows.map((r) => r.status)).toEqual(['lock_lost', 'succeeded']);
  });
});

// The server restarts while an invocation waits (-w) for the lock another holds, as with
// PostgreSQL (postgres-restart-field.test.ts): the waiter held nothing, so it connects again
// and waits for the server as for the lock; a server still down when the wait is over is 69.
// The server is killed (as a crash): a clean shutdown ends its connections one by one, and a
// waiter's try that falls between the holder's end and its own takes the freed lock at once,
// rightly, but then it never waits for the server (seen on a loaded machine). And it is killed
// once the waiter waits (-v says so), not once it is connected: connected, it may still be
// setting up its session, and a server lost then is a first connection's failure, 69 at once.
describe.skipIf(!haveMariadbd)('a MariaDB server restarted while an invocation waits (-w)', () => {
  const setUp = (server: PrivateMariadb) => {
    const box = sandbox();
    const env = { ...box.env, CRONGUARD_DATABASE_URL: server.url, CRONGUARD_SCHEMA: 'cg_wait' };
    return { box, env, log: box.path('record'), barrier: box.path('barrier'), ran: box.path('ran') };
  };
  // Both invocations are connected (no one else uses this server): the holder, and the waiter,
  // which (its schema stamp written by the holder) sends nothing but its admissions from then on.
  // It may not be waiting yet.
  const bothConnected = (server: PrivateMariadb) => async () =>
    (await mysqlQuery<{ n: number }>("SELECT COUNT(*) AS n FROM information_schema.processlist WHERE user = 'root' AND id <> CONNECTION_ID()", [], server.url))[0]?.n === 2;
  const statuses = async (server: PrivateMariadb) => (await mysqlQuery<{ status: string }>('SELECT status FROM cg_wait.runs ORDER BY id', [], server.url)).map((r) => r.status);

  it('the holder stops (75); the waiter connects again and runs (exit 0); each run recorded once', async () => {
    const server = await privateMariadb();
    const { box, env, log, barrier, ran } = setUp(server);
    const holder = start(['-n', 'restart-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-v', '-w', '60s', '-n', 'restart-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitToSay(waiter, said, /is held; waiting up to 1m00s for it\n/, 'the waiter to wait');
    await server.crash();
    const lost = await holder.done;
    expect(lost.code).toBe(75);
    expect(lost.stderr).toMatch(/cronguard: restart-wait: lock lost: [^\n]*; command terminated after \S+ \(run 1; cronguard logs 1\)\n$/);
    // The holder's record waits in the spool (beside, if the restart caught the waiter's
    // admission in flight, that admission's, which ends its row if the server has one).
    expect(spooled(box.stateDir).filter((f) => f.includes(`_${holder.child.pid}_`))).toHaveLength(1);
    await waitToSay(waiter, said, /restart-wait: [^\n]*MySQL at [^\n]*; waiting for it as for the lock\n/, 'the waiter to find the server down');
    await server.start();
    const result = await waiter.done;
    release(barrier);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/restart-wait: MySQL reachable again\n/);
    expect(result.stderr).not.toMatch(/^cronguard: (cannot reach|MySQL at)|connection lost|unavailable/m);
    expect(lines(ran)).toEqual(['ran']);
    expect(lines(log)).toEqual([expect.stringMatching(/^start /)]);
    expect(spooled(box.stateDir)).toHaveLength(0);
    expect(await statuses(server)).toEqual(['lock_lost', 'succeeded']);
  }, 120_000);

  it('a server still down when the wait is over: 69, one line, nothing run', async () => {
    const server = await privateMariadb();
    const { box, env, log, barrier, ran } = setUp(server);
    const holder = start(['-n', 'down-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-w', '3s', '-n', 'down-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    await waitFor(bothConnected(server), 'the waiter to connect');
    await server.crash();
    const result = await waiter.done;
    expect((await holder.done).code).toBe(75);
    release(barrier);
    await server.start();
    expect(result.code).toBe(69);
    // Refused at its last try to connect again, or, the wait over before one, reset by the crash.
    expect(result.stderr).toMatch(/^cronguard: cannot reach MySQL at root@127\.0\.0\.1:\d+\/mysql: (ECONNREFUSED|ECONNRESET)\n$/);
    expect(lines(ran)).toEqual([]);
    // Only the holder's run, started before the restart; its end waits in the spool (beside,
    // if the restart caught the waiter's admission in flight, that admission's: nothing ran).
    expect(await statuses(server)).toEqual(['running']);
    expect(spooled(box.stateDir).filter((f) => f.includes(`_${holder.child.pid}_`))).toHaveLength(1);
  }, 120_000);

  it('--no-log (the lock alone): the waiter connects again and runs; a server still down past its wait, 69', async () => {
    const server = await privateMariadb();
    const { box, env, log, barrier, ran } = setUp(server);
    const holder = start(['--no-log', '-n', 'nolog-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['--no-log', '-v', '-w', '60s', '-n', 'nolog-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitToSay(waiter, said, /is held; waiting up to 1m00s for it\n/, 'the waiter to wait');
    await server.crash();
    expect((await holder.done).code).toBe(75);
    await waitToSay(waiter, said, /nolog-wait: [^\n]*MySQL at [^\n]*; waiting for it as for the lock\n/, 'the waiter to find the server down');
    await server.start();
    const result = await waiter.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/nolog-wait: MySQL reachable again\n/);
    expect(lines(ran)).toEqual(['ran']);

    const [again, stillDown] = [box.path('again'), box.path('still-down')];
    const second = start(['--no-log', '-n', 'nolog-wait', '--', fixture('hold.sh'), again, barrier], env);
    await waitFor(() => lines(again).length > 0, 'the second holder to start its command');
    const late = start(['--no-log', '-v', '-w', '3s', '-n', 'nolog-wait', '--', 'sh', '-c', `echo ran >> ${stillDown}`], env);
    await waitToSay(late, collected(late), /is held; waiting up to 3s for it\n/, 'the second waiter to wait');
    await server.crash();
    const down = await late.done;
    expect((await second.done).code).toBe(75);
    release(barrier);
    await server.start();
    expect(down.code).toBe(69);
    // Its last line (before it, -v's), and no other error.
    expect(down.stderr).toMatch(/\ncronguard: cannot reach MySQL at root@127\.0\.0\.1:\d+\/mysql: (ECONNREFUSED|ECONNRESET)\n$/);
    expect(down.stderr.match(/^cronguard: cannot reach/gm)).toHaveLength(1);
    expect(lines(stillDown)).toEqual([]);
  }, 120_000);

  it('-l lease: the holder keeps its lease through the restart; the waiter connects again and runs after it', async () => {
    const server = await privateMariadb();
    const { box, env, log, barrier, ran } = setUp(server);
    const holder = start(['-l', 'lease', '-n', 'lease-wait', '--', fixture('hold.sh'), log, barrier], env);
    await waitFor(() => lines(log).length > 0, 'the holder to start its command');
    const waiter = start(['-l', 'lease', '-v', '-w', '60s', '-n', 'lease-wait', '--', 'sh', '-c', `echo ran >> ${ran}`], env);
    const said = collected(waiter);
    await waitFor(() => said.stderr().includes('is held; waiting up to 1m00s for it'), 'the waiter to wait');
    await server.shutdown();
    await waitFor(() => /lease-wait: [^\n]*MySQL at [^\n]*; waiting for it as for the lock\n/.test(said.stderr()), 'the waiter to find the server down');
    await server.start();
    await waitFor(() => said.stderr().includes('lease-wait: MySQL reachable again'), 'the waiter to connect again');
    release(barrier);
    const [held, result] = await Promise.all([holder.done, waiter.done]);
    expect(held).toMatchObject({ code: 0, stderr: '' });
    expect(result.code).toBe(0);
    expect(lines(ran)).toEqual(['ran']);
    expect(lines(log)).toEqual([expect.stringMatching(/^start /), expect.stringMatching(/^end /)]);
    expect(spooled(box.stateDir)).toHaveLength(0);
    expect(await statuses(server)).toEqual(['succeeded', 'succeeded']);
  }, 120_000);
});
