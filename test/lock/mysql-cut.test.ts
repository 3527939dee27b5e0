import { describe, expect, it } from 'vitest';
import { mysqlLockName } from '../../src/store/mysql/lock-name.js';
import { fixture, isAlive, lines, start, waitFor } from '../helpers.js';
import { mysqlQuery, mysqlSandbox } from '../mysql-helpers.js';
import { mysqlProxy } from '../mysql-proxy.js';

// The network between cronguard and its MySQL server, cut or gone silent while a job holds
// its lock: the heartbeat notices, the command is stopped, 75.

describe('mysql lock over a failing network', () => {
  for (const fault of ['cut', 'freeze'] as const) {
    it(`a connection ${fault === 'cut' ? 'cut' : 'gone silent'} mid-run: the command is stopped, 75`, async () => {
      const box = mysqlSandbox();
      const job = box.job(fault);
      const through = await mysqlProxy();
      const pids = box.path('pids');
      const run = start(['--no-log', '-n', job, '--kill-after', '1s', '--', fixture('tree.sh'), pids], { ...box.env, CRONGUARD_DATABASE_URL: through.url });
      await waitFor(() => lines(pids).length === 3, 'the command to start');
      const [held] = await mysqlQuery<{ id: number | null }>('SELECT IS_USED_LOCK(?) AS id', [mysqlLockName(box.database, job)]);
      expect(held?.id).not.toBeNull();
      through[fault]();
      const result = await run.done;
      expect(result.code).toBe(75);
      expect(result.stderr).toMatch(fault === 'cut' ? /lock lost: .*; command terminated/ : /lock lost: the server stopped answering; command terminated/);
      for (const pid of lines(pids).map(Number)) expect(isAlive(pid)).toBe(false);
    });
  }
});
