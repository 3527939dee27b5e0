import { describe, expect, it } from 'vitest';
import { cronguard, fixture, lines, release, sandbox, spooled, start, waitFor } from '../helpers.js';
import { haveMariadbd, privateMariadb } from '../mariadb-server.js';
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
