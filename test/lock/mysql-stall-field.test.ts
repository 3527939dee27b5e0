import { describe, expect, it } from 'vitest';
import { besides, cronguard, fixture, isAlive, lines, start, waitFor } from '../helpers.js';
import { mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';

// A lock session that falls silent is ended by the server after LOCK_IDLE_S (60 s), which
// frees the name, so that a partition strands a job's lock for a minute rather than hours. A
// wrapper that is stopped (SIGSTOP, a frozen VM) falls silent too: its command must be dead
// before the server gives the name to the next host. Slow (the server's minute): field test.
describe('a mysql lock holder that stalls', () => {
  it('has its command killed by the watchdog before the server frees the lock; it exits 75 once it runs again', async () => {
    const box = mysqlSandbox();
    const job = box.job('stall');
    const log = box.path('log');
    const holder = start(['--no-log', '-n', job, '--', fixture('hold.sh'), log, box.path('never')], box.env);
    await waitFor(() => lines(log).length > 0, 'the command to start');
    const command = Number(lines(log)[0]?.split(' ')[1]);
    holder.child.kill('SIGSTOP');
    try {
      // The waiter gets the lock once the server ended the stopped holder's session, and looks
      // whether the holder's command still runs.
      const waiter = await cronguard(['--no-log', '-w', '10m', '-n', job, '--', ...besides(command, box.path('seen'))], box.env);
      expect(waiter).toMatchObject({ code: 0, stderr: '' });
      expect(lines(box.path('seen'))).toEqual(['alone']);
    } finally {
      holder.child.kill('SIGCONT');
    }
    const result = await holder.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(new RegExp(`^cronguard: ${job}: lock lost: [^\\n]*; command \\S+ after [^\\n]*\\n$`));
  });

  // Issue 35, item 9: stopped past the watchdog's 20 s but not the server's minute, then let go
  // on: the watchdog killed the command, and the wrapper, finding it SIGKILLed, recorded it
  // `killed`, 137, though docs/fleet-mysql.md promises the run is lost: 75, `lock_lost`.
  it('stopped past the watchdog but not the server\'s minute, then continued: the run is lock_lost, 75, the command dead', async () => {
    const box = mysqlSandbox();
    const job = box.job('paused');
    const log = box.path('log');
    const holder = start(['-n', job, '--', fixture('hold.sh'), log, box.path('never')], box.env);
    await waitFor(() => lines(log).length > 0, 'the command to start');
    const command = Number(lines(log)[0]?.split(' ')[1]);
    holder.child.kill('SIGSTOP');
    try {
      // The watchdog acts between 21 and 22 s after the last proof: the command is gone.
      await waitFor(() => !isAlive(command), 'the watchdog to end the command', 120_000);
    } finally {
      holder.child.kill('SIGCONT');
    }
    const result = await holder.done;
    expect(result.code).toBe(75);
    expect(result.stderr).toMatch(new RegExp(`^cronguard: ${job}: lock lost: [^\\n]*; command \\S+ after [^\\n]*\\n$`));
    const rows = await mysqlQuery<{ status: string }>(`SELECT status FROM \`${box.database}\`.runs`);
    expect(rows.map((r) => r.status)).toEqual(['lock_lost']);
  });
});

